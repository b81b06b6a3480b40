"""The daemon's own check of a command's origin: with a command key,
only commands signed with it, fresh and not replayed, are applied."""

from __future__ import annotations

import hashlib
import hmac
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

from controller.command_auth import (
    FUTURE_SKEW_S,
    PAST_WINDOW_S,
    CommandGate,
    MemorySeen,
    SeenCommands,
    canonical,
    sign,
    signed_bytes,
    stamp,
    wire,
)
from controller.commands_schema import CommandError, command_dict, parse_command
from controller.config import load_config
from controller.errors import ConfigError
from controller.journal import Journal
from tests.conftest import BrokerFactory, Subscriber

KEY = b"k3y-for-tests-only"


def gate(table: str = "T01", key: bytes | None = KEY, seen: SeenCommands | None = None) -> CommandGate:
    return CommandGate(table, seen if seen is not None else MemorySeen(), key)


def test_a_signed_fresh_command_passes_once() -> None:
    g = gate()
    cmd = sign({"id": "1", "cmd": "accept", "coup": 4}, KEY, now=1000.0, table="T01")
    assert cmd["table"] == "T01"
    assert g.check(cmd, now=1001.0) is None
    assert g.check(cmd, now=1002.0) == "replayed command: already taken"


def test_unsigned_tampered_stale_or_wrong_key_commands_are_refused() -> None:
    g = gate()
    assert "unauthenticated" in (g.check({"id": "1", "cmd": "new_shoe"}, 0.0) or "")
    signed = sign({"id": "2", "cmd": "void", "coup": 3, "reason": "x"}, KEY, now=1000.0, table="T01")
    assert "bad signature" in (g.check({**signed, "coup": 4}, 1000.0) or "")
    other = sign({"id": "3", "cmd": "new_shoe"}, b"other", 1000.0, table="T01")
    assert "bad signature" in (g.check(other, 1000.0) or "")
    assert "stale" in (g.check(sign({"id": "4", "cmd": "new_shoe"}, KEY, 1000.0, "T01"), 1400.0) or "")


def test_a_signature_is_bound_to_its_table() -> None:
    """T01's signed command is refused by a T02 controller
    with the same key, and the table cannot be changed or left out."""
    captured = sign({"id": "1", "cmd": "end_shoe"}, KEY, now=1000.0, table="T01")
    assert b'"table":"T01"' in canonical(captured), "the signed text names the table"
    assert gate("T02").check(captured, 1000.0) == "command for table 'T01': this controller is table 'T02'"
    assert "bad signature" in (gate("T02").check({**captured, "table": "T02"}, 1000.0) or "")
    untabled = {k: v for k, v in captured.items() if k != "table"}
    assert "bad signature" in (gate().check(untabled, 1000.0) or "")
    # signed without a table at all (the old format): refused
    old = {"id": "1", "cmd": "end_shoe", "ts": 1000.0}
    old["sig"] = hmac.new(KEY, canonical(old), hashlib.sha256).hexdigest()
    assert gate().check(old, 1000.0) == "unauthenticated command: a signed command must name its 'table'"
    assert gate().check(captured, 1000.0) is None


def test_the_freshness_window_is_300_s_back_and_5_s_ahead() -> None:
    """A ts 250 s ahead used to pass; only clock skew may."""
    now = 10_000.0
    assert (PAST_WINDOW_S, FUTURE_SKEW_S) == (300.0, 5.0)

    def check(ts: float) -> str | None:
        return gate().check(sign({"id": "c", "cmd": "new_shoe"}, KEY, now=ts, table="T01"), now)

    assert check(now - 300.0) is None
    assert "stale" in (check(now - 300.01) or "")
    assert check(now + 5.0) is None
    assert "from the future" in (check(now + 5.01) or "")
    assert "from the future" in (check(now + 250.0) or "")


def test_unsigned_commands_need_a_fresh_ts_and_are_taken_once() -> None:
    """Without a key too: no ts, an old ts or a second
    delivery (a retained copy, a replay) is refused."""
    g = gate(key=None)
    assert "without 'ts'" in (g.check({"id": "1", "cmd": "new_shoe"}, 1000.0) or "")
    assert "stale" in (g.check({"id": "1", "cmd": "new_shoe", "ts": 600.0}, 1000.0) or "")
    cmd = stamp({"id": "1", "cmd": "new_shoe"}, "T01", 1000.0)
    assert g.check(cmd, 1000.5) is None
    assert g.check(cmd, 1001.0) == "replayed command: already taken"
    assert "table 'T09'" in (g.check({**cmd, "id": "2", "table": "T09"}, 1001.0) or "")
    assert g.check({k: v for k, v in {**cmd, "id": "3"}.items() if k != "table"}, 1001.0) is None


def test_replay_protection_survives_a_restart_in_the_journal(tmp_path: Path) -> None:
    """The taken commands live in the journal's SQLite, so
    a new process (a new gate on the reopened journal) refuses a replay;
    notes expire with the window, so the table stays bounded."""
    path = tmp_path / "j.sqlite3"
    captured = sign({"id": "1", "cmd": "end_shoe"}, KEY, now=1000.0, table="T01")
    with Journal(path) as j:
        assert gate(seen=j).check(captured, 1000.0) is None
    with Journal(path) as j:
        assert gate(seen=j).check(captured, 1010.0) == "replayed command: already taken"
        assert j.commands_remembered() == 1
        later = sign({"id": "2", "cmd": "end_shoe"}, KEY, now=1400.0, table="T01")
        assert gate(seen=j).check(later, 1400.0) is None
        assert j.commands_remembered() == 1, "the expired note was dropped"


def test_the_command_parser_takes_table_ts_and_sig_and_nothing_looser() -> None:
    cmd = sign({"id": "1", "cmd": "enter_card", "coup": 2, "card": "TD"}, KEY, 5.0, table="T01")
    assert command_dict(parse_command(json.dumps(cmd).encode())) == cmd
    with pytest.raises(CommandError, match="sig"):
        parse_command(json.dumps({**cmd, "sig": "nothex"}).encode())
    with pytest.raises(CommandError, match="ts"):
        parse_command(json.dumps({**cmd, "ts": "yesterday"}).encode())
    with pytest.raises(CommandError, match="table"):
        parse_command(json.dumps({**cmd, "table": "T" * 33}).encode())
    with pytest.raises(CommandError, match="table"):
        parse_command(json.dumps({**cmd, "table": "T01/#"}).encode())
    assert parse_command(json.dumps({**cmd, "table": "T" * 32}).encode()).table == "T" * 32


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


def _start(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _ctl(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "ctl", *args, "-c", str(cfg), "--timeout", "20", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _reply(sub: Subscriber, cid: str, after: int = 0) -> dict[str, Any] | None:
    for m in sub.on("baccarat/T01/cmd/reply")[after:]:
        data = json.loads(m.payload)
        if data.get("id") == cid:
            return dict(data)
    return None


@pytest.mark.mqtt
def test_the_daemon_applies_signed_commands_refuses_the_rest_and_a_replay_after_a_restart(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    cfg = _write_config(tmp_path, broker.port)
    sub = subscriber(broker, ["baccarat/T01/#"])
    daemon = _start(cfg)
    try:
        assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T01/card" for m in ms), 60)
        ok = _ctl(cfg, "new-shoe")
        assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True, ok.stderr
        assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T01/card" for m in ms[-20:]), 60)
        ended = _ctl(cfg, "end-shoe")
        assert ended.returncode == 0 and json.loads(ended.stdout)["ok"] is True, ended.stderr
        end_id = json.loads(ended.stdout)["id"]
        (captured,) = [m.payload for m in sub.on("baccarat/T01/cmd") if end_id.encode() in m.payload]
        assert json.loads(captured)["table"] == "T01" and "sig" in json.loads(captured)

        sub.publish("baccarat/T01/cmd", json.dumps({"id": "forged", "cmd": "end_shoe"}))
        assert sub.wait_for(lambda ms: _reply(sub, "forged") is not None, 20)
        reply = _reply(sub, "forged")
        assert reply is not None and reply["ok"] is False and "unauthenticated" in reply["error"]
        assert sub.wait_for(
            lambda ms: any(
                m.topic == "baccarat/T01/security/alert" and b"COMMAND_REJECTED" in m.payload for m in ms
            ),
            20,
        )
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0
    assert sub.wait_for(lambda ms: [m.text for m in ms if m.topic == "baccarat/T01/status"][-1] == "offline")

    # the same captured, validly signed end_shoe after a restart: refused
    seen_replies = len(sub.on("baccarat/T01/cmd/reply"))
    daemon = _start(cfg)
    try:
        assert sub.wait_for(
            lambda ms: [m.text for m in ms if m.topic == "baccarat/T01/status"][-1] == "online", 60
        )
        sub.publish("baccarat/T01/cmd", captured)
        assert sub.wait_for(lambda ms: _reply(sub, end_id, seen_replies) is not None, 20)
        again = _reply(sub, end_id, seen_replies)
        assert again == {"id": end_id, "ok": False, "error": "replayed command: already taken"}
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0
    with Journal(tmp_path / "j.sqlite3") as j:
        applied = [
            json.loads(r.data) for r in j.inputs_since(0) if r.kind == "cmd" and b'"end_shoe"' in r.data
        ]
    assert [c["id"] for c in applied] == [end_id], "applied once, never replayed"
    assert [m for m in sub.on("baccarat/T01/shoe/ended") if b"ended by supervisor" in m.payload]


def test_an_empty_command_key_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    cfg = _write_config(tmp_path, 1883)
    (tmp_path / "command.key").write_bytes(b"\n")
    r = subprocess.run(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "command_key_file" in r.stderr and "empty" in r.stderr and "Traceback" not in r.stderr


# --- the signature covers the bytes received -------------------------------------------


def _signed_as_sent(fields: dict[str, Any], key: bytes = KEY) -> bytes:
    """A command signed over its own bytes, as any client may write them
    (here: not the canonical form, keys in the sender's order, a card in
    lower case), ``sig`` appended last."""
    body = json.dumps(fields, separators=(",", ":")).encode()
    sig = hmac.new(key, body, hashlib.sha256).hexdigest()
    return body[:-1] + b',"sig":"' + sig.encode() + b'"}'


def test_a_command_is_authenticated_over_the_bytes_received_not_as_re_encoded() -> None:
    payload = _signed_as_sent(
        {"id": "e1", "cmd": "enter_card", "coup": 2, "card": "td", "table": "T01", "ts": 1000.0}
    )
    cmd = parse_command(payload)
    assert cmd.card == "TD", "the schema takes 'td' and normalises it"  # type: ignore[union-attr]
    assert gate().check(command_dict(cmd), 1000.0, payload) is None
    # what the controller did before: the signature checked over the command
    # re-encoded after parsing ("TD", keys sorted), which the sender never signed
    assert gate().check(command_dict(cmd), 1000.0) == "unauthenticated command: bad signature"
    # any byte changed: refused, a change that parses to the same command included
    for i in range(len(payload) - 74):
        tampered = payload[:i] + bytes([payload[i] ^ 0x01]) + payload[i + 1 :]
        try:
            parsed = parse_command(tampered)
        except CommandError:
            continue  # no longer a command at all
        assert (
            gate().check(command_dict(parsed), 1000.0, tampered) == "unauthenticated command: bad signature"
        )
    spaced = payload.replace(b'"coup":2', b'"coup": 2')
    assert gate().check(command_dict(parse_command(spaced)), 1000.0, spaced) == (
        "unauthenticated command: bad signature"
    )
    upper = payload.replace(b'"td"', b'"TD"')  # the normalised card: not what was signed
    assert gate().check(command_dict(parse_command(upper)), 1000.0, upper) == (
        "unauthenticated command: bad signature"
    )
    # a signature anywhere but last, or a byte after it: refused as such
    moved = json.loads(payload)
    moved = {"sig": moved.pop("sig"), **moved}
    first = json.dumps(moved, separators=(",", ":")).encode()
    assert gate().check(command_dict(parse_command(first)), 1000.0, first) == (
        "unauthenticated command: 'sig' is not the last member of the bytes received"
    )
    assert "not the last member" in (gate().check(command_dict(cmd), 1000.0, payload + b"\n") or "")


def test_ctl_sends_its_canonical_bytes_with_the_signature_last() -> None:
    """What ``ctl`` publishes (``wire``) verifies over the bytes, and is also
    what a controller that re-encoded the command to check it computed."""
    signed = sign({"id": "1", "cmd": "enter_card", "coup": 2, "card": "TD"}, KEY, now=1000.0, table="T01")
    payload = wire(signed)
    assert payload.endswith(b',"sig":"' + signed["sig"].encode() + b'"}')
    assert signed_bytes(payload) == (canonical(signed), signed["sig"])
    assert gate().check(command_dict(parse_command(payload)), 1000.0, payload) is None
    assert json.loads(payload) == signed
    assert signed_bytes(b'{"sig":"' + b"0" * 64 + b'"}') is None  # nothing signed before it
    assert signed_bytes(payload[:-3] + b'X"}') is None  # not hex


def _journal_with_entry(tmp_path: Path, *, before_this_version: bool) -> list[dict[str, Any]]:
    """Coup 1's P3 passes unread and B3 9S is dealt; then ``enter_card 2H``
    without ``confirm``, journalled as a version before this one wrote it
    (``command_json``: taken then, unchecked) or as received now. The events
    a rebuild makes of it."""
    from controller.daemon import Daemon
    from firmware_protocols.frames import Button, Card, Hello
    from firmware_protocols.shoe_ascii import Encoder
    from tests.support.configs import write_config
    from tests.table import T0

    cfg = load_config(
        write_config(tmp_path, {"driver": "serial", "port": "/dev/null", "protocol": "shoe-ascii/1"})
    )
    enc = Encoder()
    frames = [Hello(T0, 0, "FAKE-1", "1.0", "000001"), Button(T0 + 1, 1, "NEWSHOE")]
    for seq, code in enumerate(("AS", "2C", "3H", "4D", "2S", "2D", None, "9S"), start=2):
        frames.append(Card(T0 + seq, seq, code))
    frames.append(Button(T0 + 10, 10, "RESULT"))
    entry = b'{"id":"a","cmd":"enter_card","coup":1,"card":"2H"}'
    with Journal(cfg.journal) as journal:
        for f in frames:
            journal.append_input(f.t, "rx", enc.encode(f))
        if before_this_version:
            journal.append_input(T0 + 11, "cmd", entry)
            assert journal.received_commands_from() == len(frames) + 2
        else:
            assert journal.received_commands_from() == len(frames) + 1
            journal.append_input(T0 + 11, "cmd", entry)
        daemon = Daemon(cfg)
        daemon._rebuild(journal)
        return [json.loads(p.json) for p in journal.events_since(0)]


def test_a_journal_written_before_reads_its_commands_as_then_and_received_bytes_as_sent(
    tmp_path: Path,
) -> None:
    """The same bytes in a ``cmd`` input: written by an older version (its
    ``command_json``, where an entry without ``confirm`` was taken before
    entries were checked) they are re-fed as taken then; journalled as
    received, as the supervisor sent them (refused without ``confirm``)."""
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = _journal_with_entry(tmp_path / "old", before_this_version=True)
    new = _journal_with_entry(tmp_path / "new", before_this_version=False)
    old_results = [e for e in old if e["type"] == "coup.result"]
    assert [r["player"]["cards"] for r in old_results] == [["3H", "2S", "2H"]], "taken, as then"
    assert not [e for e in new if e["type"] == "coup.result"], "refused: 2H contradicts the B3 dealt"
    assert [e for e in old if e["type"] != "card" or e.get("card") != "2H"][:3] == new[:3]


@pytest.mark.mqtt
def test_the_daemon_journals_the_bytes_received_and_a_rebuild_reproduces_their_events(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    """A command signed over ``"card": "td"`` (the schema takes it) is
    applied; the same with one byte changed is refused; the journal keeps
    the bytes as received, and a rebuild from them makes the same events
    (a different one would be a journal conflict)."""
    from controller.daemon import CHECKPOINT_KEY, Daemon

    broker = mosquitto()
    cfg = _write_config(tmp_path, broker.port)
    sub = subscriber(broker, ["baccarat/T01/#"])
    daemon = _start(cfg)
    try:
        assert sub.wait_for(
            lambda ms: [m.text for m in ms if m.topic == "baccarat/T01/status"][-1:] == ["online"], 60
        )
        now = __import__("time").time()
        good = _signed_as_sent({"id": "n1", "cmd": "new_shoe", "table": "T01", "ts": now})
        sub.publish("baccarat/T01/cmd", good)
        assert sub.wait_for(lambda ms: _reply(sub, "n1") is not None, 20)
        assert _reply(sub, "n1") == {"id": "n1", "ok": True, "error": None}
        fields = {"id": "v1", "cmd": "void", "coup": 1, "reason": "td", "table": "T01", "ts": now}
        tampered = _signed_as_sent(fields).replace(b'"reason":"td"', b'"reason":"tD"')
        sub.publish("baccarat/T01/cmd", tampered)
        assert sub.wait_for(lambda ms: _reply(sub, "v1") is not None, 20)
        assert _reply(sub, "v1") == {
            "id": "v1",
            "ok": False,
            "error": "unauthenticated command: bad signature",
        }
        entry = _signed_as_sent(
            {"id": "e1", "cmd": "enter_card", "coup": 1, "card": "td", "table": "T01", "ts": now}
        )
        sub.publish("baccarat/T01/cmd", entry)
        assert sub.wait_for(lambda ms: _reply(sub, "e1") is not None, 20)
        reply = _reply(sub, "e1")
        assert reply is not None and "bad signature" not in str(reply.get("error")), reply
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        cmds = [r.data for r in j.inputs_since(0) if r.kind == "cmd"]
        assert good in cmds and entry in cmds, "journalled as the bytes received"
        before = [p.json for p in j.events_since(0)]
        j.set_meta(CHECKPOINT_KEY, "")  # re-feed every input, commands included
        Daemon(load_config(cfg))._rebuild(j)  # a JournalConflict if any event differed
        assert [p.json for p in j.events_since(0)] == before
