"""A command's text is one line of UTF-8 text: a lone
surrogate (valid JSON, ``"\\ud800"``, but no UTF-8 can carry it) or a
control character in any string field is refused at the door with a reply
naming the field, and nothing is applied. Against a real daemon and broker:
before, such a ``void`` was answered ``ok: true`` and the daemon then died
with a raw traceback while storing its event, at every start after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.commands_schema import (
    CommandError,
    command_from_dict,
    parse_command,
    parse_journalled,
)
from tests.conftest import Broker, BrokerFactory, Subscriber, free_port

CMD = "baccarat/T01/cmd"
REPLY = "baccarat/T01/cmd/reply"

#: Hostile texts: each a JSON string literal, as a publisher would write it.
HOSTILE = [
    '"\\ud800"',  # a lone surrogate: valid JSON, not UTF-8
    '"caf\\udce9"',  # what surrogateescape makes of a non-UTF-8 shell argument
    '"ok\\u001b[2K\\rforged line"',  # ESC, CR: erase the line, write another
    '"a\\u0000b"',  # NUL
    '"bell\\u0007"',
    '"del\\u007f"',
    '"c1\\u009b31m"',  # C1 CSI
    '"one\\u2028two"',  # LINE SEPARATOR
]


# ------------------------------------------------------------ the parser


def _payload(**fields: str) -> bytes:
    """A void command whose fields are given as JSON literals."""
    base = {"id": '"s1"', "cmd": '"void"', "coup": "2", "reason": '"ok"', "ts": str(time.time())}
    base.update(fields)
    return ("{" + ",".join(f'"{k}":{v}' for k, v in base.items()) + "}").encode()


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("field", ["reason", "id"])
def test_a_hostile_string_field_is_refused_naming_the_field(field: str, text: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(_payload(**{field: text}))
    message = str(err.value)
    assert repr(field) in message
    assert "one line of text" in message and "control character" in message
    # the refusal itself is safe to print and to encode
    message.encode("utf-8")
    assert message.isprintable()


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize(
    "field,cmd",
    [("card", "enter_card"), ("table", "void"), ("sig", "void"), ("cmd", "void")],
)
def test_every_other_string_field_refuses_hostile_text(field: str, cmd: str, text: str) -> None:
    fields = {"cmd": f'"{cmd}"', field: text}
    if cmd == "enter_card":
        fields["card"] = fields.get("card", '"TD"')
    payload = _payload(**fields)
    if cmd == "enter_card":
        payload = payload.replace(b',"reason":"ok"', b"")
    with pytest.raises(CommandError) as err:
        parse_command(payload)
    str(err.value).encode("utf-8")
    assert str(err.value).isprintable()


def test_the_bound_is_exact_printable_text_passes() -> None:
    # the last characters either side of the refused ranges are taken
    for ok in ("\x20", "\x7e", "\xa0", "é", "\u2027", "\u202a", "\ue000", "\U0001f0a1", "caf\xe9"):
        cmd = parse_command(_payload(reason=json.dumps(ok), id=json.dumps("id" + ok)))
        assert cmd.reason == ok  # type: ignore[union-attr]
    for bad in ("\x1f", "\x7f", "\x80", "\x9f", "\t", "\n", "\u2028", "\u2029", "\ud800", "\udfff"):
        with pytest.raises(CommandError, match="'reason'"):
            parse_command(_payload(reason=json.dumps(bad)))


def test_the_other_command_paths_refuse_alike() -> None:
    """A command given as an object (tools, tests) and one read back from the
    journal go through the same check."""
    with pytest.raises(CommandError, match="'reason'"):
        command_from_dict({"id": "x", "cmd": "void", "coup": 1, "reason": "\ud800"})
    with pytest.raises(CommandError, match="'id'"):
        command_from_dict({"id": "\x1b]0;x\x07", "cmd": "accept", "coup": 1})
    with pytest.raises(CommandError, match="'reason'"):
        parse_journalled(b'{"id":"x","cmd":"void","coup":1,"reason":"\\ud800"}')
    # what a daemon took and journalled before the door closed is read back
    # as taken (its events are stored; the outputs escape them): only a lone
    # surrogate, which no journal could store with its events, is refused
    old = parse_journalled(b'{"id":"x\\u001b","cmd":"void","coup":1,"reason":"a\\u001b[2K\\rb"}')
    assert old.id == "x\x1b" and old.reason == "a\x1b[2K\rb"  # type: ignore[union-attr]


# ------------------------------------------------------- a real daemon


def _config(tmp_path: Path, broker: Broker) -> Path:
    cfg = {
        "table": "T01",
        # slow enough that a coup is in play for a few seconds: a void of it applies
        "device": {"driver": "fake", "seed": 3, "cards_per_second": 2},
        "journal": str(tmp_path / "journal.sqlite3"),
        "outputs": {
            "stdout": False,
            "mqtt": {"host": broker.host, "port": broker.port, "client_id": "shoe-T01"},
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def _reply(sub: Subscriber, cid: str) -> dict[str, Any] | None:
    for m in sub.on(REPLY):
        data = json.loads(m.payload)
        if data.get("id") == cid:
            return data
    return None


def _coup_in_play(sub: Subscriber) -> int:
    """The coup of the latest card event (a coup still being dealt), or 0."""
    cards = [json.loads(m.payload) for m in sub.on("baccarat/T01/card")]
    coups = [c["coup"] for c in cards if isinstance(c.get("coup"), int)]
    return coups[-1] if coups else 0


@pytest.mark.mqtt
def test_hostile_command_text_is_refused_and_the_daemon_deals_on(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    cfg = _config(tmp_path, broker)
    log = tmp_path / "daemon.log"
    daemon = _start(cfg, log)
    try:
        assert sub.wait_for(lambda ms: _coup_in_play(sub) > 0, 90), log.read_text()[-3000:]
        sent: list[tuple[str, str]] = []
        for i, text in enumerate(HOSTILE):
            coup = _coup_in_play(sub)
            cid = f"hostile-reason-{i}"
            payload = (
                f'{{"id":"{cid}","cmd":"void","coup":{coup},"reason":{text},'
                f'"table":"T01","ts":{time.time()}}}'
            )
            sub.publish(CMD, payload.encode())
            sent.append((cid, "'reason'"))
            assert sub.wait_for(lambda ms, cid=cid: _reply(sub, cid) is not None, 20), (
                f"no reply to {cid}; daemon exit {daemon.poll()}: {log.read_text()[-3000:]}"
            )
        # a hostile id: the reply can only be matched by the refusal's text
        sub.publish(CMD, f'{{"id":"\\ud800","cmd":"accept","coup":1,"ts":{time.time()}}}'.encode())
        assert sub.wait_for(lambda ms: any(m.topic == REPLY and b"'id'" in m.payload for m in ms), 20), (
            log.read_text()[-3000:]
        )
        for cid, field in sent:
            reply = _reply(sub, cid)
            assert reply is not None and reply["ok"] is False, (cid, reply)
            assert field in reply["error"] and "one line of text" in reply["error"], reply
        # nothing applied: no coup was voided by a supervisor
        voids = [json.loads(m.payload) for m in sub.on("baccarat/T01/coup/void")]
        assert not [v for v in voids if v.get("code") == "SUPERVISOR_VOID"], voids
        # and the table deals on
        before = len(sub.on("baccarat/T01/card"))
        assert sub.wait_for(lambda ms: sum(m.topic == "baccarat/T01/card" for m in ms) > before + 2, 30)
        assert daemon.poll() is None, log.read_text()[-3000:]
    finally:
        assert _stop(daemon) == 0, log.read_text()[-3000:]
    # a restart is clean: it rebuilds and deals on
    again = _start(cfg, log)
    try:
        before = len(sub.on("baccarat/T01/card"))
        assert sub.wait_for(lambda ms: sum(m.topic == "baccarat/T01/card" for m in ms) > before + 2, 60), (
            log.read_text()[-3000:]
        )
    finally:
        assert _stop(again) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "Traceback" not in text and "DAEMON FAILED" not in text, text[-3000:]


# ------------------------------------------------------------------ ctl


def _ctl(cfg: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "ctl", *args, "-c", str(cfg), "--timeout", "5"],
        capture_output=True,
        timeout=60,
        env={**os.environ, "LC_ALL": "C.UTF-8", "PYTHONUTF8": "1"},
    )


@pytest.mark.parametrize(
    "arg",
    [b"caf\xe9", b"\xff", b"ok\x1b[2Kforged", b"a\rb", b"bell\x07", b"one\xe2\x80\xa8two", b"c1\xc2\x9b"],
)
def test_ctl_refuses_a_reason_that_is_not_one_line_of_text(tmp_path: Path, arg: bytes) -> None:
    """Exit 2 with one line, before anything is published: the broker in the
    config is a port nobody listens on, so reaching it would exit 1."""
    cfg = tmp_path / "ctl.yaml"
    cfg.write_text(
        yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"host": "127.0.0.1", "port": free_port()}}})
    )
    r = _ctl(cfg, "void", "--coup", "2", "--reason", arg)
    assert r.returncode == 2, r
    lines = r.stderr.decode("utf-8").splitlines()
    assert len(lines) == 1 and "--reason" in lines[0] and "one line of text" in lines[0], r.stderr
    assert not any(b < 0x20 or b == 0x7F for b in r.stderr.rstrip(b"\n")), r.stderr


# ------------------------------------------- defence in depth: the commit


def test_an_event_that_cannot_be_encoded_is_the_daemons_one_critical_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the door, a text that cannot be written as UTF-8 reaching an
    event would be a bug; storing it fails inside the commit. That failure
    goes through the daemon's input-failure handling (one critical line,
    exit 1, the input not stored) and the next start is clean."""
    import io

    import structlog

    from controller.config import load_config
    from controller.daemon import Daemon
    from controller.engine.facade import Engine
    from controller.shoelog import ShoelogWriter
    from drivers.fake import FakeShoe
    from tests.support.configs import write_config

    capture = tmp_path / "shoe.shoelog"
    with capture.open("w", encoding="utf-8") as fh:
        w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T01"})
        for t, data in FakeShoe(seed=3, decks=1, shoes=1, cut_card_min=12, cards_per_second=1).stream():
            w.write(t, "<", data)
    cfg = write_config(tmp_path, {"driver": "replay", "file": str(capture), "realtime": False})
    feed = Engine.feed

    def hostile(self: Engine, frame: Any) -> Any:
        out = feed(self, frame)
        if getattr(frame, "name", None) == "RESULT":
            for e in out:
                if e["type"] == "coup.result":
                    e["tags"] = ["\ud800"]  # the simulated bug
        return out

    monkeypatch.setattr(Engine, "feed", hostile)
    with structlog.testing.capture_logs() as logs:
        assert Daemon(load_config(cfg), stdout=io.StringIO(), stop_at_eof=True).run() == 1
    critical = [x for x in logs if x["log_level"] == "critical"]
    assert len(critical) == 1, logs
    assert critical[0]["event"].startswith("DAEMON FAILED applying an input")
    assert critical[0]["error"].startswith("UnicodeEncodeError: ")
    monkeypatch.undo()
    with structlog.testing.capture_logs() as logs:
        assert Daemon(load_config(cfg), stdout=io.StringIO(), stop_at_eof=True).run() == 0
    assert not [x for x in logs if x["log_level"] == "critical"], logs


# ------------------------------------------------- other CLI text arguments


@pytest.mark.parametrize(
    "argv,name",
    [
        (["history", "coup", "caf\udce9", "1"], "SHOE"),
        (["history", "coups", "--shoe", "S\x1b[2K"], "--shoe"),
        (["history", "errors", "UNREAD\rCARD"], "CODE"),
        (["history", "coups", "--since", "2h\x00"], "--since"),
        (["report", "--dsn", "host=x", "--table", "T\udcff"], "--table"),
        (["replay", "x.shoelog", "--table", "T\u2028"], "--table"),
        (["ctl", "enter-card", "-c", "x.yaml", "--coup", "1", "--card", "T\x9bD"], "--card"),
    ],
)
def test_every_cli_text_argument_is_one_line_of_utf8(
    argv: list[str], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"shoe-controller {argv[0]}: {name} must be one line")
    err.encode("utf-8")


def test_a_path_argument_may_be_any_file_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file name is the file system's, not text: a non-UTF-8 one is taken
    (here: it does not exist), and said escaped in the one-line error."""
    from controller.cli import main

    missing = str(tmp_path / "caf\udce9\x1b.sqlite3")
    assert main(["history", "shoes", "--journal", missing]) != 0
    err = capsys.readouterr().err
    assert "one line" not in err and "caf\\udce9\\x1b" in err and err.count("\n") == 1, err


def test_a_journal_holding_a_command_taken_before_the_door_closed_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A void whose reason holds ESC and CR, taken and journalled by a daemon
    before commands were held to one line, is re-fed as it was taken: the
    rebuild reproduces its stored events, no "DAEMON FAILED"."""
    import io
    import sqlite3

    import structlog

    from controller.commands_schema import Void
    from controller.config import load_config
    from controller.daemon import CHECKPOINT_KEY, Daemon
    from controller.shoelog import ShoelogWriter
    from drivers.fake import FakeShoe
    from tests.support.configs import write_config

    capture = tmp_path / "shoe.shoelog"
    with capture.open("w", encoding="utf-8") as fh:
        w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T01"})
        for t, data in FakeShoe(seed=3, decks=1, shoes=1, cut_card_min=12, cards_per_second=1).stream():
            w.write(t, "<", data)
    cfg = write_config(tmp_path, {"driver": "replay", "file": str(capture), "realtime": False})
    replies: list[dict[str, Any]] = []
    original = Daemon._input

    def input_then_void(self: Daemon, t: float, kind: str, data: bytes, parsed: Any = None) -> None:
        original(self, t, kind, data, parsed)
        shoe = self.engine.shoe if self.engine is not None else None
        if not replies and kind == "rx" and shoe is not None and shoe.coups:
            # as the daemon took it then: the Struct, past no one-line check
            self._input_command(Void(id="old\x1b", coup=max(shoe.coups), reason="a\x1b[2K\rforged"))
            assert self.last_reply is not None
            replies.append(self.last_reply)

    monkeypatch.setattr(Daemon, "_input", input_then_void)
    assert Daemon(load_config(cfg), stdout=io.StringIO(), stop_at_eof=True).run() == 0
    assert replies and replies[0]["ok"], replies
    monkeypatch.undo()
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    with db:
        db.execute("DELETE FROM meta WHERE key = ?", (CHECKPOINT_KEY,))  # re-feed every input
        voids = db.execute("SELECT json FROM events WHERE type = 'coup.void'").fetchall()
    db.close()
    assert any("forged" in v[0] for v in voids), voids
    with structlog.testing.capture_logs() as logs:
        assert Daemon(load_config(cfg), stdout=io.StringIO(), stop_at_eof=True).run() == 0
    assert not [x for x in logs if x["log_level"] == "critical"], logs
