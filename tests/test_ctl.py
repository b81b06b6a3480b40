"""``shoe-controller ctl`` as a supervisor uses it: a
config with no device (``examples/supervisor.yaml``), ``--coup`` required
where a command needs it, answers as sentences (the position an entered
card filled, the misdeal an accept corrected) and ``--json`` for the raw
reply. Against a real daemon and the suite's mosquitto."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from controller.config import ClientConfig, load_client_config
from tests.conftest import Broker, BrokerFactory, Subscriber
from tests.test_cli_errors import cli, one_line_error

EXAMPLES = Path(__file__).parent.parent / "examples"
CAPTURES = Path(__file__).parent / "captures"


def _head(name: str, last_seq: int) -> str:
    """A regression capture up to (and with) the frame of sequence ``last_seq``."""
    out = []
    for line in (CAPTURES / name).read_text().splitlines(keepends=True):
        out.append(line)
        if f",{last_seq}," in line:
            break
    return "".join(out)


def _supervisor(tmp_path: Path, broker: Broker) -> Path:
    path = tmp_path / "supervisor.yaml"
    path.write_text(
        yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"host": broker.host, "port": broker.port}}})
    )
    return path


@contextmanager
def _daemon(tmp_path: Path, broker: Broker, capture: str, sub: Subscriber) -> Iterator[None]:
    """A daemon replaying ``capture`` (no pacing: no deadline passes while
    the test runs) and then waiting for commands."""
    shoelog = tmp_path / "session.shoelog"
    shoelog.write_text(capture)
    config = tmp_path / "table.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "table": "T01",
                "device": {"driver": "replay", "file": str(shoelog)},
                "journal": str(tmp_path / "journal.sqlite3"),
                "odds": False,
                "outputs": {"stdout": False, "mqtt": {"host": broker.host, "port": broker.port}},
            }
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert sub.wait_for(
            lambda ms: (
                any(m.topic == "baccarat/T01/misdeal" for m in ms)
                and any(m.topic == "baccarat/T01/status" and m.payload == b"online" for m in ms)
            ),
            60,
        ), "the daemon did not reach the misdeal"
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def ctl(*args: str) -> subprocess.CompletedProcess[str]:
    return cli("ctl", *args, "--timeout", "20")


# --- without a broker -------------------------------------------------------


def test_the_shipped_supervisor_config_is_valid_and_needs_no_device() -> None:
    cfg = load_client_config(EXAMPLES / "supervisor.yaml")
    assert isinstance(cfg, ClientConfig) and cfg.device is None
    assert cfg.outputs.mqtt is not None
    r = cli("check-config", str(EXAMPLES / "supervisor.yaml"))
    assert r.returncode == 0, r.stderr
    assert "no device: a config for ctl and replay --out mqtt; run refuses it" in r.stdout


def test_the_daemon_refuses_a_config_without_a_device() -> None:
    line = one_line_error(cli("run", "-c", str(EXAMPLES / "supervisor.yaml")), 2)
    assert line.endswith(
        "supervisor.yaml: device: required key missing (the daemon needs its shoe; "
        "only ctl and replay --out mqtt take a config without one)"
    ), line


@pytest.mark.parametrize("action", ["void", "enter-card", "accept"])
def test_coup_is_required_and_shown_as_required(action: str) -> None:
    r = cli("ctl", action, "-c", str(EXAMPLES / "supervisor.yaml"), "--card", "TD")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "the following arguments are required: --coup" in r.stderr
    usage = cli("ctl", action, "-h").stdout
    assert " --coup N" in usage and "[--coup N]" not in usage


def test_a_bad_card_or_table_is_a_usage_error_before_any_broker_is_reached() -> None:
    sup = str(EXAMPLES / "supervisor.yaml")
    line = one_line_error(cli("ctl", "enter-card", "--coup", "3", "--card", "1Z", "-c", sup), 2)
    assert line.startswith("shoe-controller ctl: --card: "), line
    line = one_line_error(cli("ctl", "new-shoe", "--table", "T/1", "-c", sup), 2)
    assert line.startswith("shoe-controller ctl: --table must be 1 to 32 of"), line


# --- against a daemon -------------------------------------------------------


@pytest.mark.mqtt
def test_ctl_answers_in_sentences_and_names_the_position_an_entered_card_filled(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    sup = str(_supervisor(tmp_path, broker))
    # 3S is the first card and burns 4C 5D 6H; coup 1's P1 passes unread
    with _daemon(tmp_path, broker, _head("x_unread_card.shoelog", 6), sub):
        awaiting = [json.loads(m.payload) for m in sub.on("baccarat/T01/misdeal")]
        assert [(e["code"], e["action"]) for e in awaiting] == [("UNREAD_CARD", "awaiting_supervisor")]
        coup = awaiting[0]["coup"]
        position = awaiting[0]["detail"].split()[0]  # "P1 passed the reader unread"

        r = ctl("enter-card", "--coup", str(coup), "--card", "9d", "-c", sup)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"coup {coup}: 9D entered as {position}\n"

        r = ctl("void", "--coup", str(coup), "--reason", "dealer error", "-c", sup)
        assert (r.returncode, r.stdout) == (0, f"coup {coup} void: supervisor (dealer error)\n"), r.stderr

        r = ctl("void", "--coup", str(coup), "-c", sup)
        line = one_line_error(r, 1)
        assert line == (
            f"shoe-controller ctl: table T01 refused void coup {coup}: coup {coup} is already settled or void"
        )
        assert r.stdout == ""

        r = ctl("void", "--coup", str(coup), "-c", sup, "--json")
        assert r.returncode == 1 and r.stderr == ""
        reply = json.loads(r.stdout)
        assert reply["ok"] is False and "already settled or void" in reply["error"]

        r = ctl("new-shoe", "-c", sup)
        shoe = json.loads(sub.on("baccarat/T01/shoe/started")[0].payload)["shoe"]
        assert (r.returncode, r.stdout) == (
            0,
            f"shoe {shoe} ended after {coup} coups; the next card starts the new shoe\n",
        ), r.stderr

        # the new shoe, loaded but not yet dealt from
        r = ctl("end-shoe", "-c", sup)
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(r"shoe \S+ ended after 0 coups\n", r.stdout), r.stdout
        r = ctl("end-shoe", "-c", sup)
        assert one_line_error(r, 1) == "shoe-controller ctl: table T01 refused end-shoe: no shoe in play"

        r = ctl("new-shoe", "-c", sup, "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stderr


@pytest.mark.mqtt
def test_a_card_entered_for_a_lost_frame_is_named_where_it_was_dealt_and_accept_names_what_it_accepted(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    sup = str(_supervisor(tmp_path, broker))
    # 6S 7C are P1 B1 of coup 1, frame 8 is lost, QD (frame 9) is held
    with _daemon(tmp_path, broker, _head("x_sequence_gap.shoelog", 9), sub):
        gap = json.loads(sub.on("baccarat/T01/misdeal")[0].payload)
        assert (gap["code"], gap["coup"]) == ("SEQUENCE_GAP", 1)
        r = ctl("enter-card", "--coup", "1", "--card", "8H", "-c", sup)
        assert (r.returncode, r.stdout) == (0, "coup 1: 8H entered as P2\n"), r.stderr
        assert sub.wait_for(
            lambda ms: any(m.topic == "baccarat/T01/card" and b'"QD"' in m.payload for m in ms), 20
        )
        qd = next(json.loads(m.payload) for m in sub.on("baccarat/T01/card") if b'"QD"' in m.payload)
        assert qd["position"] == "B2"

    # the same gap accepted instead: nothing else was lost
    broker2 = mosquitto()
    sub2 = subscriber(broker2, ["baccarat/T01/#"])
    other = tmp_path / "second"
    other.mkdir()
    sup2 = str(_supervisor(other, broker2))
    with _daemon(other, broker2, _head("x_sequence_gap.shoelog", 9), sub2):
        r = ctl("accept", "--coup", "1", "-c", sup2)
        assert (r.returncode, r.stdout) == (0, "coup 1: SEQUENCE_GAP accepted\n"), r.stderr


# --- a table the broker does not know, and options before the action --------


def test_options_may_come_before_the_action_and_config_is_required_either_way() -> None:
    sup = str(EXAMPLES / "supervisor.yaml")
    # before the action: parsed, and the action's own checks still apply
    line = one_line_error(cli("ctl", "-c", sup, "--table", "T/1", "new-shoe"), 2)
    assert line.startswith("shoe-controller ctl: --table must be 1 to 32 of"), line
    r = cli("ctl", "-c", sup, "void")
    assert r.returncode == 2 and "the following arguments are required: --coup" in r.stderr
    # after the action wins over before it
    line = one_line_error(cli("ctl", "--table", "T01", "new-shoe", "-c", sup, "--table", "T/2"), 2)
    assert line.startswith("shoe-controller ctl: --table must be 1 to 32 of"), line
    line = one_line_error(cli("ctl", "void", "--coup", "3"), 2)
    assert line.startswith("shoe-controller ctl: the following arguments are required: -c/--config"), line


@pytest.mark.mqtt
def test_a_table_without_a_controller_is_named_at_once_not_after_the_timeout(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sup = str(_supervisor(tmp_path, broker))
    # no retained status at all: a wrong --table (or a table never started);
    # the timeout is long, the answer must not wait for it
    r = cli("ctl", "-c", sup, "--table", "T09", "--timeout", "60", "void", "--coup", "3")
    line = one_line_error(r, 1)
    assert line == (
        "shoe-controller ctl: table T09: no controller is known on this broker"
        " (no retained baccarat/T09/status); check --table and the config's table and topic_prefix"
    )
    # a controller that said it went offline (its Last Will, retained)
    sub = subscriber(broker, ["baccarat/T01/cmd"])
    sub.publish("baccarat/T01/status", "offline", retain=True)
    r = cli("ctl", "-c", sup, "--timeout", "60", "void", "--coup", "3")
    assert one_line_error(r, 1) == (
        "shoe-controller ctl: table T01: its controller is offline (retained baccarat/T01/status"
        " = offline); only a running controller takes a command"
    )
    # neither published a command onto the table's topic
    assert not sub.wait_for(lambda ms: bool(ms), 0.5)
    # a status longer than any a controller writes is read cut, not whole
    sub.publish("baccarat/T01/status", "x" * 100_000, retain=True)
    r = cli("ctl", "-c", sup, "--timeout", "0.5", "void", "--coup", "3")
    assert one_line_error(r, 1).startswith("shoe-controller ctl: no reply within 0.5 s from table T01")
