"""Outside text on a person's screen: a control character
(ESC, CR, BEL, NUL, DEL, C1), a line separator or a lone surrogate in a
command's reason or id, or in a device's HELLO fields, is shown escaped by
every human output (``textsafe.visible``): ``history`` (text and CSV),
``ctl``, the run/replay terminal lines. Journals written before commands
were refused at the door may hold such text, so these tests write one as it
was written then: the engine given the command's Struct directly."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from controller.commands_schema import Void, command_json
from controller.journal import Journal
from controller.outputs.text import render
from controller.textsafe import csv_cell, one_line_problem, visible, visible_lines
from firmware_protocols.frames import Hello
from tests.conftest import BrokerFactory, Subscriber
from tests.table import Table

SCRIPT = Path(sys.executable).with_name("shoe-controller")
#: Erase the line, go back to its start, write another; ring; NUL; DEL; C1
#: CSI; a line separator.
FORGED = "ok\x1b[2K\r12:00:00 coup 3 settled\x07\x00\x7f\x9b31m\u2028next"


def raw_controls(data: bytes) -> list[str]:
    """The control characters (C0 but LF, DEL, C1) and separators in UTF-8
    output, as found: none may reach a terminal."""
    text = data.decode("utf-8")  # and it is UTF-8
    return [
        f"U+{ord(c):04X}"
        for c in text
        if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029"
    ]


# ------------------------------------------------------------ the rule


def _safe(out: str) -> None:
    for ch in out:
        n = ord(ch)
        assert not (n < 0x20 or 0x7F <= n <= 0x9F), repr(out)
        assert not 0xD800 <= n <= 0xDFFF, repr(out)
        assert ch not in "\u2028\u2029", repr(out)
    out.encode("utf-8")
    assert out.isprintable()


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
@example("\ud800")
@example("caf\udce9")
@example(FORGED)
@example("\U0010ffff\u202e\u200b\xa0")
def test_visible_leaves_no_control_separator_or_surrogate_for_any_text(text: str) -> None:
    out = visible(text)
    _safe(out)
    if text.isprintable():
        assert out == text  # printable text is shown as it is
    _safe(csv_cell(text))
    for line in visible_lines(text).split("\n"):
        _safe(line)


def test_the_escapes() -> None:
    assert visible("a\x1bb\rc\nd\te\x00f\x7fg\x9bh") == "a\\x1bb\\rc\\nd\\te\\x00f\\x7fg\\x9bh"
    assert visible("x\u2028y\u2029z\ud800\U000e0001") == "x\\u2028y\\u2029z\\ud800\\U000e0001"
    assert visible("café 🂡 \\x1b") == "café 🂡 \\x1b"  # printable, a backslash included, as is
    assert visible(12) == "12"
    assert visible_lines("a\x1b\nb") == "a\\x1b\nb"


def test_a_csv_cell_is_never_a_formula_but_a_number_stays_a_number() -> None:
    assert csv_cell('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert csv_cell("+cmd|' /C calc'!A0") == "'+cmd|' /C calc'!A0"
    assert csv_cell("-2+3") == "'-2+3"
    assert csv_cell("-1") == "-1" and csv_cell(-0.95) == "-0.95" and csv_cell("+0.5") == "+0.5"
    assert csv_cell("a=b") == "a=b"


def test_one_line_problem_names_the_character_and_where() -> None:
    assert one_line_problem("fine é 🂡") is None
    assert one_line_problem("ab\x1b") == "found a control character, U+001B, at character 3"
    assert "lone surrogate" in str(one_line_problem("caf\udce9"))
    assert "separator" in str(one_line_problem("a\u2029"))


# ------------------------------------------------ a journal written before


def _journal(path: Path) -> str:
    """A shoe whose coup 1 was voided with a hostile reason and id, the
    command journalled as the daemon did before the door refused it; its
    shoe id."""
    with Journal(path) as j:
        tb = Table(table="T01")

        def feed(out: list[dict[str, Any]], kind: str, data: bytes) -> None:
            j.append_input(tb.t, kind, data, out)

        feed(tb.hello(), "rx", b"hello")
        feed(tb.new_shoe(), "rx", b"newshoe")
        for c in ("AS", "2C", "9H", "8D"):
            feed(tb.card(c), "rx", c.encode())
        cmd = Void(id="v\x1b]0;pwned\x07", coup=1, reason=FORGED)
        tb.t += 1
        reply, out = tb.engine.command(cmd, tb.t)
        assert reply["ok"], reply
        tb.events.extend(out)
        feed(out, "cmd", command_json(cmd))
        feed(tb.result(), "rx", b"result")
        return str(next(e["shoe"] for e in tb.events if e["type"] == "shoe.started"))


def _history(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(SCRIPT), "history", *args], capture_output=True, timeout=120, check=False)


def test_history_shows_a_hostile_reason_and_id_escaped_in_text_and_csv(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    shoe = _journal(journal)
    text = _history("coup", shoe, "1", "--journal", str(journal))
    assert text.returncode == 0, text.stderr
    assert raw_controls(text.stdout) == [], text.stdout
    assert b"ok\\x1b[2K\\r12:00:00 coup 3 settled\\x07\\x00\\x7f\\x9b31m\\u2028next" in text.stdout, (
        text.stdout
    )

    table = _history("coup", shoe, "1", "--journal", str(journal), "--csv")
    assert table.returncode == 0, table.stderr
    assert raw_controls(table.stdout) == [], table.stdout
    rows = list(csv.reader(io.StringIO(table.stdout.decode("utf-8"))))
    assert any("\\x1b[2K\\r12:00:00" in cell for row in rows for cell in row), rows

    errors = _history("errors", "SUPERVISOR_VOID", "--shoe", shoe, "--journal", str(journal))
    assert errors.returncode == 0, errors.stderr
    assert raw_controls(errors.stdout) == [] and b"\\x1b[2K" in errors.stdout, errors.stdout

    # the exact text is still there for a program: --json
    doc = json.loads(_history("coup", shoe, "1", "--journal", str(journal), "--json").stdout)
    assert any(FORGED in str(e["detail"]) for e in doc["entries"]), doc["entries"]


def test_the_terminal_lines_show_hostile_hello_fields_and_reasons_escaped() -> None:
    """``run``/``replay`` terminal lines (``outputs.text``): a device's HELLO
    fields (firmware text) and a supervisor's reason."""
    tb = Table(table="T01")
    out = tb.feed(Hello(tb.t + 1, 0, "EVIL\x1b[2K\rmodel", "fw\x07\x9b", "0\u2028001"))
    tb.new_shoe()
    tb.cards("AS", "2C", "9H", "8D")
    tb.t += 1
    _, voided = tb.engine.command(Void(id="x", coup=1, reason=FORGED), tb.t)
    lines = [line for e in [*out, *voided] if (line := render(e)) is not None]
    assert any("EVIL\\x1b[2K\\rmodel" in line for line in lines), lines
    assert any("\\x1b[2K\\r12:00:00" in line for line in lines), lines
    assert raw_controls("\n".join(lines).encode("utf-8")) == []


# ------------------------------------------------------------------- ctl


@pytest.mark.mqtt
def test_ctl_shows_hostile_event_and_reply_texts_escaped(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    """Whoever can publish on the table's topics: a card event with a
    hostile position answers an enter-card; a reply with a hostile error
    answers a void. ``ctl`` prints both escaped, one line each."""
    broker = mosquitto()
    cfg = tmp_path / "ctl.yaml"
    cfg.write_text(
        yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"host": broker.host, "port": broker.port}}})
    )
    table = subscriber(broker, ["baccarat/T01/cmd"])

    def answer(c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        cmd = json.loads(msg.payload)
        if cmd["cmd"] == "enter_card":
            c.publish(
                "baccarat/T01/cmd/reply", json.dumps({"id": cmd["id"], "ok": True, "error": None}), qos=1
            )
            event = {"type": "card", "coup": cmd["coup"], "card": cmd["card"], "position": FORGED}
            c.publish("baccarat/T01/card", json.dumps(event), qos=1)
        else:
            reply = {"id": cmd["id"], "ok": False, "error": FORGED}
            c.publish("baccarat/T01/cmd/reply", json.dumps(reply), qos=1)

    table.client.on_message = answer
    # the stand-in table is online, as a controller says (ctl sends nothing to a table that is not)
    table.publish("baccarat/T01/status", "online", retain=True)
    time.sleep(0.5)

    def ctl(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(SCRIPT), "ctl", *args, "-c", str(cfg), "--timeout", "20"],
            capture_output=True,
            timeout=60,
            check=False,
        )

    entered = ctl("enter-card", "--coup", "2", "--card", "TD")
    assert entered.returncode == 0, entered.stderr
    assert raw_controls(entered.stdout) == [] and b"\\x1b[2K\\r" in entered.stdout, entered.stdout
    assert entered.stdout.count(b"\n") == 1

    refused = ctl("void", "--coup", "2", "--reason", "test")
    assert refused.returncode == 1, refused
    assert raw_controls(refused.stderr) == [] and b"\\x1b[2K\\r" in refused.stderr, refused.stderr
    assert refused.stderr.count(b"\n") == 1
