"""Supervisor commands as they arrive on ``<prefix>/<table>/cmd`` (SPEC
section 5): strict parsing and validation, nothing else.

Pure (no I/O, no engine) so it can be fuzzed: ``parse_command`` either
returns a normalised command dict or raises ``CommandError`` whose message
is the ``error`` of the reply. A command that does not parse changes
nothing.

Accepted shapes (every other key is an error, so a typo is not ignored)::

    {"id": ID, "cmd": "void",       "coup": N, "reason": "..."}
    {"id": ID, "cmd": "enter_card", "coup": N, "card": "TD"}
    {"id": ID, "cmd": "accept",     "coup": N}
    {"id": ID, "cmd": "new_shoe"}
    {"id": ID, "cmd": "end_shoe"}

``ID`` is a non-empty string (at most 128 characters) or a 64-bit integer; it is
echoed in the reply. ``coup`` is an integer from 1 to 1000; ``card`` a card code
(normalised: ``"td"``, ``"10D"`` -> ``"TD"``).

Every command also carries ``ts`` (the sender's Unix time, a finite
number) and may carry ``table`` (the table it is meant for) and ``sig``
(its HMAC): ``controller.command_auth`` checks them against the clock, the
controller's table and the key; here only their shapes are checked.
"""

from __future__ import annotations

import json
import re
from typing import Any

from controller.cards import CardError, parse_card
from controller.config import table_problem

MAX_PAYLOAD = 4096
MAX_ID = 128
MAX_REASON = 500
#: No shoe holds more coups (12 decks, at least 4 cards a coup: 156); the
#: engine bounds ``accept`` more tightly by the cards left in the shoe.
MAX_COUP = 1000
#: ``ts`` is Unix seconds: finite, from 1970 to the year 5138.
MAX_TS = 1e11

#: The fields each command takes besides ``id`` and ``cmd``.
COMMANDS: dict[str, tuple[str, ...]] = {
    "void": ("coup", "reason"),
    "enter_card": ("coup", "card"),
    "accept": ("coup",),
    "new_shoe": (),
    "end_shoe": (),
}

CommandId = str | int


class CommandError(ValueError):
    """A command that cannot be carried out as sent. ``command_id`` is the
    sender's id when it could be read (else None), for the reply."""

    def __init__(self, message: str, command_id: CommandId | None = None) -> None:
        super().__init__(message)
        self.command_id = command_id


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CommandError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise CommandError(f"{name} is not JSON")


def _command_id(value: Any) -> CommandId:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise CommandError("'id' must be a string or an integer")
    if isinstance(value, str) and not 0 < len(value) <= MAX_ID:
        raise CommandError(f"'id' must be 1 to {MAX_ID} characters")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise CommandError("an integer 'id' must fit in 64 bits (signed)")
    return value


def _coup(value: Any, cid: CommandId) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUP:
        raise CommandError(f"'coup' must be an integer from 1 to {MAX_COUP}", cid)
    return value


def parse_command(payload: bytes) -> dict[str, Any]:
    """Parse and validate one command payload; raises ``CommandError``."""
    if len(payload) > MAX_PAYLOAD:
        raise CommandError(f"command larger than {MAX_PAYLOAD} bytes")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError("command is not UTF-8") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except CommandError:
        raise
    except (ValueError, RecursionError) as exc:
        raise CommandError(f"command is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError("command must be a JSON object")
    if "id" not in data:
        raise CommandError("missing 'id'")
    cid = _command_id(data["id"])
    cmd = data.get("cmd")
    if cmd is None:
        raise CommandError("missing 'cmd'", cid)
    if not isinstance(cmd, str) or cmd not in COMMANDS:
        raise CommandError(f"unknown cmd {cmd!r} (one of {', '.join(COMMANDS)})", cid)
    fields = COMMANDS[cmd]
    extra = sorted(set(data) - {"id", "cmd", "table", "ts", "sig", *fields})
    if extra:
        raise CommandError(f"{cmd}: unknown field {extra[0]!r}", cid)
    for name in fields:
        if name not in data:
            raise CommandError(f"{cmd}: missing {name!r}", cid)
    out: dict[str, Any] = {"id": cid, "cmd": cmd}
    if "coup" in fields:
        out["coup"] = _coup(data["coup"], cid)
    if "card" in fields:
        card = data["card"]
        if not isinstance(card, str):
            raise CommandError(f"{cmd}: 'card' must be a card code such as 'TD'", cid)
        try:
            out["card"] = parse_card(card)
        except CardError as exc:
            raise CommandError(f"{cmd}: {exc}", cid) from None
    if "table" in data:
        table = data["table"]
        if not isinstance(table, str) or table_problem(table) is not None:
            raise CommandError(f"{cmd}: 'table' must be a table name ([A-Za-z0-9_-], 1 to 32)", cid)
        out["table"] = table
    if "ts" in data:
        ts = data["ts"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts < MAX_TS:
            raise CommandError(f"{cmd}: 'ts' must be Unix seconds (a number from 0 to {MAX_TS:g})", cid)
        out["ts"] = ts
    if "sig" in data:
        sig = data["sig"]
        if not isinstance(sig, str) or not re.fullmatch(r"[0-9a-f]{64}", sig):
            raise CommandError(f"{cmd}: 'sig' must be 64 lower-case hex digits (HMAC-SHA256)", cid)
        out["sig"] = sig
    if "reason" in fields:
        reason = data["reason"]
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            raise CommandError(f"{cmd}: 'reason' must be a string of at most {MAX_REASON} characters", cid)
        out["reason"] = reason
    return out


def id_of(payload: bytes) -> CommandId | None:
    """The sender's id from a payload that may not parse at all (for the
    error reply); None when there is no usable id."""
    try:
        data = json.loads(payload.decode("utf-8"))
        return _command_id(data["id"]) if isinstance(data, dict) else None
    except (ValueError, KeyError, RecursionError, CommandError):
        return None


def error_reply(exc: CommandError, payload: bytes = b"") -> dict[str, Any]:
    """The reply to a command that did not parse."""
    cid = exc.command_id if exc.command_id is not None else id_of(payload)
    return {"id": cid, "ok": False, "error": str(exc)}
