"""``shoe-controller ctl void|enter-card|accept|new-shoe|end-shoe``: send one
supervisor command to a table through the broker and print its reply.

The broker settings come from the config's ``outputs.mqtt`` (a supervisor's
own credentials: the shipped ACL lets only supervisors publish commands).
Every command is stamped with the config's ``table`` and the current time
(``ts``) and, when the config has ``command_key_file``, signed over both, so
this host's clock must be within a few seconds of the controller's (NTP).
It speaks the config's ``protocol`` (MQTT 5 by default, like the
controller). Exit 0 when the controller applied the command, 1 when it
refused it, the broker refused it (MQTT 5 says so in its PUBACK) or no reply
came in time, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.cards import CardError, parse_card
from controller.command_auth import read_key, sign, stamp
from controller.config import load_config
from controller.errors import RuntimeFailure, UsageError

ACTIONS = {
    "void": "void",
    "enter-card": "enter_card",
    "accept": "accept",
    "new-shoe": "new_shoe",
    "end-shoe": "end_shoe",
}


def build_command(args: argparse.Namespace) -> dict[str, Any]:
    cmd: dict[str, Any] = {"id": f"ctl-{uuid.uuid4().hex[:12]}", "cmd": ACTIONS[args.action]}
    if cmd["cmd"] in ("void", "enter_card", "accept"):
        if args.coup is None:
            raise UsageError(f"{args.action} needs --coup N")
        cmd["coup"] = args.coup
    if cmd["cmd"] == "enter_card":
        if not args.card:
            raise UsageError("enter-card needs --card, e.g. --card TD")
        try:
            cmd["card"] = parse_card(args.card)
        except CardError as exc:
            raise UsageError(str(exc)) from None
    if cmd["cmd"] == "void":
        cmd["reason"] = args.reason
    return cmd


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    m = cfg.outputs.mqtt
    if m is None:
        raise UsageError(f"{args.config}: outputs.mqtt is needed to reach the broker")
    cmd = build_command(args)
    # every command carries its table and time (the controller refuses one
    # without a fresh ts); signed over both when the config has the key
    if m.command_key_file is not None:
        cmd = sign(cmd, read_key(m.command_key_file), time.time(), cfg.table)
    else:
        cmd = stamp(cmd, cfg.table, time.time())
    prefix = f"{m.topic_prefix}/{cfg.table}"
    reply: dict[str, Any] = {}
    got = threading.Event()
    subscribed = threading.Event()
    failure: list[str] = []
    sent: list[int] = []  # the command's message id

    client = mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=f"ctl-{uuid.uuid4().hex[:8]}",
        protocol=mqtt.MQTTv5 if m.protocol == "5" else mqtt.MQTTv311,
    )
    if m.username is not None:
        client.username_pw_set(m.username, m.password())
    if m.tls is not None:
        client.tls_set(ca_certs=m.tls.ca_file, certfile=m.tls.cert_file, keyfile=m.tls.key_file)

    def on_connect(c: mqtt.Client, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if rc.is_failure:
            failure.append(f"broker refused the connection: {rc}")
            got.set()
            return
        c.subscribe(f"{prefix}/cmd/reply", qos=1)

    def on_subscribe(c: mqtt.Client, _u: Any, _mid: Any, codes: Any, _p: Any = None) -> None:
        if any(getattr(rc, "is_failure", False) for rc in codes):
            failure.append("the broker refused the subscription to cmd/reply (ACL?)")
            got.set()
            return
        subscribed.set()
        sent.append(c.publish(f"{prefix}/cmd", json.dumps(cmd, separators=(",", ":")), qos=1).mid)

    def on_publish(_c: mqtt.Client, _u: Any, mid: int, rc: Any, _p: Any = None) -> None:
        # MQTT 5 says why a publish was not taken (an MQTT 3.1.1 broker drops
        # it silently: then no reply comes)
        if mid in sent and getattr(rc, "is_failure", False):
            failure.append(f"the broker refused the command: {rc} (ACL?)")
            got.set()

    def on_message(_c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        try:
            data = json.loads(msg.payload)
        except ValueError:
            return
        if isinstance(data, dict) and data.get("id") == cmd["id"]:
            reply.update(data)
            got.set()

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.on_publish = on_publish
    try:
        client.connect(m.host, m.port, keepalive=30)
    except OSError as exc:
        raise RuntimeFailure(f"cannot reach the broker at {m.host}:{m.port}: {exc}") from None
    client.loop_start()
    try:
        if not got.wait(args.timeout):
            where = "no reply" if subscribed.is_set() else "not connected"
            raise RuntimeFailure(
                f"{where} within {args.timeout:g} s from table {cfg.table} (command {cmd['id']})"
            )
    finally:
        client.disconnect()
        client.loop_stop()
    if failure:
        raise RuntimeFailure(failure[0])
    print(json.dumps(reply, separators=(",", ":")))
    return 0 if reply.get("ok") else 1
