"""``shoe-controller ctl void|enter-card|accept|new-shoe|end-shoe|correct``: send one
supervisor command to a table through the broker and say what it did.

The broker settings come from the config's ``outputs.mqtt`` (a supervisor's
own credentials: the shipped ACL lets only supervisors publish commands);
the config needs no ``device:`` section (``examples/supervisor.yaml``).

The answer is a sentence on stdout (``coup 12 void: supervisor``). The
controller's reply says only whether the command applied, so for what it
did (the position an entered card filled, the misdeal an ``accept``
corrected, the shoe a new-shoe ended) ``ctl`` also listens to the table's
events for a moment after the reply; if they do not come in time the sentence
says only what the reply does. ``--json`` prints the raw reply instead.
Exit 0 when the controller applied the command, 1 when it refused it (its
reason on stderr) or no reply came in time, 2 for usage errors.

Every command is stamped with its table and the current time (``ts``) and,
when the config has ``command_key_file``, signed over both, so this host's
clock must be within a few seconds of the controller's (NTP). It speaks the
config's ``protocol`` (MQTT 5 by default, like the controller); a command
the broker refuses (MQTT 5 says so in its PUBACK) exits 1 too.
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt

from controller.cards import CardError, parse_card
from controller.command_auth import sign, stamp, wire
from controller.commands_schema import HAND_POSITIONS, MAX_COUP
from controller.config import load_client_config, table_problem
from controller.errors import RuntimeFailure, UsageError
from controller.mqtt_client import connect_options, make_client, status_text
from controller.textsafe import visible

ACTIONS = {
    "void": "void",
    "enter-card": "enter_card",
    "accept": "accept",
    "new-shoe": "new_shoe",
    "end-shoe": "end_shoe",
    "correct": "correct",
}
#: The event topics (under ``<prefix>/<table>/``) that tell what a command did.
EVENT_TOPICS = (
    "card",
    "misdeal",
    "coup/void",
    "coup/corrected",
    "security/alert",
    "shoe/started",
    "shoe/ended",
)
#: How long to wait, after the reply, for the events that say what was done.
EVENT_GRACE_S = 2.0
MAX_TIMEOUT_S = 600.0

Event = dict[str, Any]


def build_command(args: argparse.Namespace) -> dict[str, Any]:
    cmd: dict[str, Any] = {"id": f"ctl-{uuid.uuid4().hex[:12]}", "cmd": ACTIONS[args.action]}
    if cmd["cmd"] in ("void", "enter_card", "accept", "correct"):
        if args.coup is None or not 1 <= args.coup <= MAX_COUP:
            raise UsageError(f"--coup must be 1 to {MAX_COUP}")
        cmd["coup"] = args.coup
    if cmd["cmd"] == "enter_card":
        try:
            cmd["card"] = parse_card(args.card or "")
        except CardError as exc:
            raise UsageError(f"--card: {exc}") from None
    if cmd["cmd"] in ("enter_card", "accept") and getattr(args, "confirm", False):
        cmd["confirm"] = True
    if cmd["cmd"] == "void":
        cmd["reason"] = args.reason
    if cmd["cmd"] == "correct":
        cmd.update(correction_fields(args.card, args.reason, args.confirm))
    return cmd


def correction_fields(pairs: list[str], reason: str, confirm: bool) -> dict[str, Any]:
    """``correct``'s fields from ``--card POS=CARD`` (repeated), ``--reason``
    and ``--confirm``, checked as the controller will (UsageError)."""
    if not 1 <= len(pairs) <= len(HAND_POSITIONS):
        raise UsageError(f"--card: 1 to {len(HAND_POSITIONS)} cards (POS=CARD), not {len(pairs)}")
    cards: dict[str, str] = {}
    for pair in pairs:
        pos, sep, code = pair.partition("=")
        pos = pos.strip().upper()
        if not sep or pos not in HAND_POSITIONS:
            raise UsageError(
                f"--card {pair!r}: POS=CARD with POS one of {' '.join(HAND_POSITIONS)}, e.g. P1=9H"
            )
        if pos in cards:
            raise UsageError(f"--card: {pos} given twice")
        try:
            cards[pos] = parse_card(code.strip())
        except CardError as exc:
            raise UsageError(f"--card {pos}: {exc}") from None
    if not reason.strip():
        raise UsageError("--reason is required: why the result is corrected")
    out: dict[str, Any] = {"cards": {p: cards[p] for p in HAND_POSITIONS if p in cards}, "reason": reason}
    if confirm:
        out["confirm"] = True
    return out


# --- what the command did, from the events that followed -------------------


def _entered(cmd: dict[str, Any]) -> Callable[[list[Event]], str | None]:
    def find(events: list[Event]) -> str | None:
        cards = [e for e in events if e.get("type") == "card" and e.get("card") == cmd["card"]]
        # An unread card is filled in place: its event says ``entered``. A
        # card entered for a lost frame is dealt, first, when the coup's
        # held cards are released: an ordinary card event of the coup.
        for e in sorted(cards, key=lambda e: not e.get("entered")):
            if e.get("position") == "burn" and e.get("entered"):
                return f"coup {cmd['coup']}: {cmd['card']} entered as the first card (it sets the burn)"
            if e.get("coup") == cmd["coup"]:
                return f"coup {cmd['coup']}: {cmd['card']} entered as {e.get('position')}"
        return None

    return find


def _accepted(cmd: dict[str, Any]) -> Callable[[list[Event]], str | None]:
    def find(events: list[Event]) -> str | None:
        for e in events:
            if e.get("type") == "security.alert" and e.get("code") == "COUP_NUMBERING_RESTORED":
                return f"coup numbering restored: the next coup dealt is coup {e.get('coup')}"
        codes = [
            str(e["code"])
            for e in events
            if e.get("type") == "misdeal" and e.get("coup") == cmd["coup"] and e.get("action") == "corrected"
        ]
        if codes:
            return f"coup {cmd['coup']}: {', '.join(codes)} accepted"
        return None

    return find


def _corrected(cmd: dict[str, Any]) -> Callable[[list[Event]], str | None]:
    def find(events: list[Event]) -> str | None:
        for e in events:
            if e.get("type") == "coup.corrected" and e.get("command_id") == cmd["id"]:
                changes = ", ".join(f"{c['position']} {c['was']}->{c['card']}" for c in e.get("changes", []))
                hands = ", ".join(
                    f"{who.capitalize()} {' '.join(e[who]['cards'])} ({e[who]['total']})"
                    for who in ("player", "banker")
                )
                said = f"coup {e['coup']} corrected ({changes}): {hands}: {e['winner']}"
                return f"{said}; supersedes {e['supersedes']}"
        return None

    return find


def _shoe_ended(then: str) -> Callable[[list[Event]], str | None]:
    # new_shoe ends the shoe in play (if any); the new one is announced by
    # its first card, which may come much later
    def find(events: list[Event]) -> str | None:
        for e in events:
            if e.get("type") == "shoe.ended":
                return f"shoe {e.get('shoe')} ended after {e.get('coups')} coups{then}"
        return None

    return find


def describe(cmd: dict[str, Any]) -> tuple[Callable[[list[Event]], str | None] | None, str]:
    """How to read the events that follow an applied command, and the
    sentence to give when they say nothing (or do not come in time)."""
    name = cmd["cmd"]
    if name == "void":
        reason = f" ({cmd['reason']})" if cmd.get("reason") else ""
        return None, f"coup {cmd['coup']} void: supervisor{reason}"
    if name == "enter_card":
        return _entered(cmd), (
            f"coup {cmd['coup']}: {cmd['card']} entered in place of a lost frame; "
            "it takes its position when the held cards are released"
        )
    if name == "accept":
        return _accepted(cmd), f"coup {cmd['coup']}: accepted"
    if name == "correct":
        return _corrected(cmd), f"coup {cmd['coup']} corrected"
    if name == "new_shoe":
        then = "; the next card starts the new shoe"
        return _shoe_ended(then), "new shoe loaded: the next card starts it"
    return _shoe_ended(""), "shoe ended"


# --- the exchange with the broker -------------------------------------------


def table_absent(table: str, topic: str, status: str | None) -> str | None:
    """Why a command cannot reach ``table``, from its retained status (None:
    send it). No retained status: no controller has ever said it runs that
    table on this broker (a wrong ``--table`` or ``topic_prefix``, or a table
    never started); ``offline``: its controller is stopped or lost."""
    if status is None:
        return (
            f"table {table}: no controller is known on this broker (no retained {topic});"
            " check --table and the config's table and topic_prefix"
        )
    if status.strip() == "offline":
        return (
            f"table {table}: its controller is offline (retained {topic} = offline);"
            " only a running controller takes a command"
        )
    return None


def run(args: argparse.Namespace) -> int:
    m, table = _broker_and_table(args)
    cmd = build_command(args)
    # every command carries its table and time (the controller refuses one
    # without a fresh ts); signed over both when the config has the key
    key = m.command_key()
    cmd = sign(cmd, key, time.time(), table) if key is not None else stamp(cmd, table, time.time())
    reading, fallback = describe(cmd)
    talk = _Exchange(m, table, cmd, reading, listen=not args.json and reading is not None)
    reply = talk.send(args.timeout)
    if args.json:
        print(json.dumps(reply, separators=(",", ":")))
        return 0 if reply.get("ok") else 1
    if not reply.get("ok"):
        what = args.action + (f" coup {cmd['coup']}" if "coup" in cmd else "")
        if (
            cmd["cmd"] in ("enter_card", "accept", "correct")
            and isinstance(reply.get("would"), list)
            and not cmd.get("confirm")
        ):
            # an entry that goes beyond its card, or a correction, not
            # applied without --confirm: what it would do
            would = "; ".join(str(x) for x in reply["would"])
            raise RuntimeFailure(f"table {table} did not apply {what} (no --confirm): it would {would}")
        raise RuntimeFailure(f"table {table} refused {what}: {reply.get('error') or 'no reason given'}")
    # the events' and the command's texts, shown escaped (textsafe.visible)
    print(visible(talk.sentence() or fallback))
    return 0


def _broker_and_table(args: argparse.Namespace) -> tuple[Any, str]:
    """The config's broker settings and the table to command, the options
    checked."""
    if args.config is None:
        raise UsageError(
            "the following arguments are required: -c/--config (a supervisor's config:"
            " table and outputs.mqtt), before or after the action"
        )
    if not (math.isfinite(args.timeout) and 0.1 <= args.timeout <= MAX_TIMEOUT_S):
        raise UsageError(f"--timeout must be 0.1 to {MAX_TIMEOUT_S:g} seconds, not {args.timeout!r}")
    cfg = load_client_config(args.config)
    m = cfg.outputs.mqtt
    if m is None:
        raise UsageError(f"{args.config}: outputs.mqtt is needed to reach the broker")
    table = cfg.table
    if args.table is not None:
        problem = table_problem(args.table)
        if problem is not None:
            raise UsageError(f"--table {problem}")
        table = args.table
    return m, table


class _Exchange:
    """One command's round trip through the broker: the table's retained
    status read first, then the command published, its reply awaited and,
    when ``listen``, the events that say what it did."""

    def __init__(
        self,
        m: Any,
        table: str,
        cmd: dict[str, Any],
        reading: Callable[[list[Event]], str | None] | None,
        *,
        listen: bool,
    ) -> None:
        self.m = m
        self.table = table
        self.cmd = cmd
        self.reading = reading
        self.listen = listen
        self.prefix = f"{m.topic_prefix}/{table}"
        self.reply: dict[str, Any] = {}
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self.got = threading.Event()
        self.said = threading.Event()  # the events say what was done
        self.subscribed = threading.Event()
        self.failure: list[str] = []
        self.sent: list[int] = []  # the command's message id
        self.status_topic = f"{self.prefix}/status"
        self.status: list[str] = []  # the table's retained status, if the broker holds one
        self.status_mid: list[int | None] = []

    def send(self, timeout: float) -> dict[str, Any]:
        """The controller's reply, awaited at most ``timeout`` seconds (and
        then the events a moment); a failure raised as one line."""
        # a client id of its own: a ctl never takes over the daemon's session
        client = make_client(self.m, f"ctl-{uuid.uuid4().hex[:8]}")
        client.on_connect = self.on_connect
        client.on_subscribe = self.on_subscribe
        client.on_message = self.on_message
        client.on_publish = self.on_publish
        try:
            client.connect_first(30, **connect_options(self.m))
        except OSError as exc:
            what = "the broker at" if len(self.m.endpoints()) == 1 else "any of the brokers"
            raise RuntimeFailure(f"cannot reach {what} {exc}") from None
        client.loop_start()
        try:
            start = time.monotonic()
            if not self.got.wait(timeout):
                where = "no reply" if self.subscribed.is_set() else "not connected"
                raise RuntimeFailure(
                    f"{where} within {timeout:g} s from table {self.table} (command {self.cmd['id']})"
                )
            if self.listen and self.reply.get("ok") and not self.failure:
                left = timeout - (time.monotonic() - start)
                self.said.wait(max(0.0, min(EVENT_GRACE_S, left)))
        finally:
            client.disconnect()
            client.loop_stop()
        if self.failure:
            raise RuntimeFailure(self.failure[0])
        return self.reply

    def sentence(self) -> str | None:
        """What the events heard say the command did, if they say it."""
        with self.lock:
            return self.reading(self.events) if self.reading is not None else None

    def _fail(self, why: str) -> None:
        self.failure.append(why)
        self.got.set()

    def on_connect(self, c: mqtt.Client, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if rc.is_failure:
            self._fail(f"broker refused the connection: {rc}")
            return
        # First the table's retained status alone (QoS 0: nothing held in
        # flight), then the reply and event topics: a broker sends a
        # subscription's retained message right after its SUBACK and handles
        # one client's packets in order, so by the second SUBACK the status
        # has come if the broker holds one.
        self.status_mid.append(c.subscribe(self.status_topic, qos=0)[1])

    def on_subscribe(self, c: mqtt.Client, _u: Any, mid: Any, codes: Any, _p: Any = None) -> None:
        prefix = self.prefix
        if mid in self.status_mid:
            if getattr(codes[0], "is_failure", False):
                # a supervisor's ACL need not grant the status: then the
                # reply's wait says it, as before
                self.status.append("?")
            events = [f"{prefix}/{t}" for t in EVENT_TOPICS] if self.listen else []
            topics = [f"{prefix}/cmd/reply", *events]
            c.subscribe([(t, 1) for t in topics])
            return
        if getattr(codes[0], "is_failure", False):
            self._fail("the broker refused the subscription to cmd/reply (ACL?)")
            return
        absent = table_absent(self.table, self.status_topic, self.status[0] if self.status else None)
        if absent is not None:
            self._fail(absent)
            return
        with self.lock:
            self.events.clear()  # only what follows the command can say what it did
            self.subscribed.set()
        # the bytes signed, with the signature appended last (``wire``)
        self.sent.append(c.publish(f"{prefix}/cmd", wire(self.cmd), qos=1).mid)

    def on_publish(self, _c: mqtt.Client, _u: Any, mid: int, rc: Any, _p: Any = None) -> None:
        # MQTT 5 says why a publish was not taken (an MQTT 3.1.1 broker drops
        # it silently: then no reply comes)
        if mid in self.sent and getattr(rc, "is_failure", False):
            self._fail(f"the broker refused the command: {rc} (ACL?)")

    def on_message(self, _c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        if msg.topic == self.status_topic:
            if msg.retain and not self.status:
                self.status.append(status_text(msg.payload))
            return
        try:
            data = json.loads(msg.payload)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if msg.topic == f"{self.prefix}/cmd/reply":
            if data.get("id") == self.cmd["id"]:
                self.reply.update(data)
                self.got.set()
            return
        if msg.retain or self.reading is None:
            return
        with self.lock:
            if not self.subscribed.is_set():
                return
            self.events.append(data)
            if self.reading(self.events) is not None:
                self.said.set()
