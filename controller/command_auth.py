"""The daemon's own checks of a supervisor command before it reaches the
engine: origin (besides the broker's ACL), table, freshness and once-only.

Every command, signed or not, must carry ``ts`` (the sender's Unix time in
seconds) within ``[now - PAST_WINDOW_S, now + FUTURE_SKEW_S]`` of the
controller's clock: a command is good for 5 minutes after it was made and
never before (the few seconds ahead are only for clock skew between two
NTP-synchronised hosts). A command is taken once: its signature (or, when
unsigned, the digest of its table and canonical JSON) is remembered in the
journal until its ``ts`` leaves the window, so a captured or retained
command is refused on every later delivery, across restarts too.

With ``outputs.mqtt.command_key_file`` set, a command must also carry
``table`` (this controller's) and ``sig``: the HMAC-SHA256, with the shared
key, of the bytes received without their ``sig`` member, which must be the
object's last, written ``,"sig":"<64 hex digits>"}`` (74 bytes, with ``}`` put
back in their place: ``signed_bytes``). Nothing is re-encoded before the
check, so whatever the parser then normalises (a card ``"td"`` read as
``"TD"``) was signed as it was sent. The table is in the signed bytes, so a
command signed for T01 is refused by T02 even when both share the key. A
command that fails any check is refused with an error reply and a
``security.alert`` (COMMAND_REJECTED). ``shoe-controller ctl`` adds
``table`` and ``ts`` and signs when its config has the key (``wire``: its
canonical JSON, ``sig`` appended last, so a controller that re-encodes the
command to check it gets the same bytes).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Protocol

#: How long after its ``ts`` a command may still be applied (seconds).
PAST_WINDOW_S = 300.0
#: How far ahead of the controller's clock a ``ts`` may be (clock skew only).
FUTURE_SKEW_S = 5.0


#: How a signed command's bytes end: ``,"sig":"`` + 64 hex digits + ``"}``.
_SIG_HEAD = b',"sig":"'
_SIG_BYTES = len(_SIG_HEAD) + 64 + 2
_HEX = frozenset(b"0123456789abcdef")


def canonical(cmd: Mapping[str, Any]) -> bytes:
    """The command without ``sig`` as compact JSON, keys sorted, ASCII: what
    ``sign`` signs, and the digest an unsigned command is remembered by."""
    body = {k: v for k, v in cmd.items() if k != "sig"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def signed_bytes(payload: bytes) -> tuple[bytes, str] | None:
    """What the sender signed, and the signature: ``payload`` without its
    last member ``,"sig":"<64 hex>"}`` (``}`` put back in its place). None
    when the bytes do not end so (no ``sig``, or not last)."""
    tail = payload[-_SIG_BYTES:]
    if len(payload) <= _SIG_BYTES or not tail.startswith(_SIG_HEAD) or not tail.endswith(b'"}'):
        return None
    sig = tail[len(_SIG_HEAD) : -2]
    if not _HEX.issuperset(sig):
        return None
    return payload[:-_SIG_BYTES] + b"}", sig.decode("ascii")


def wire(cmd: Mapping[str, Any]) -> bytes:
    """The bytes a command is sent as: its ``canonical`` JSON, with its
    ``sig`` (if any) appended as the last member, so that ``signed_bytes``
    of them is exactly what ``sign`` signed."""
    body = canonical(cmd)
    sig = cmd.get("sig")
    if sig is None:
        return body
    return body[:-1] + _SIG_HEAD + str(sig).encode("ascii") + b'"}'


def stamp(cmd: dict[str, Any], table: str, now: float) -> dict[str, Any]:
    """The command as sent: with its table and the sender's time."""
    return {**cmd, "table": table, "ts": round(now, 3)}


def sign(cmd: dict[str, Any], key: bytes, now: float, table: str) -> dict[str, Any]:
    """The command stamped (table, ts) and signed over both: the HMAC of
    its ``canonical`` bytes, which ``wire`` sends with ``sig`` appended."""
    signed = stamp(cmd, table, now)
    signed["sig"] = hmac.new(key, canonical(signed), hashlib.sha256).hexdigest()
    return signed


class SeenCommands(Protocol):
    """Where taken commands are remembered (the journal, in the daemon)."""

    def remember_command(self, key: str, expires: float, now: float) -> bool: ...


class MemorySeen:
    """An in-memory ``SeenCommands`` (tests, tools): forgets on restart."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}

    def remember_command(self, key: str, expires: float, now: float) -> bool:
        self._seen = {k: e for k, e in self._seen.items() if e >= now}
        if key in self._seen:
            return False
        self._seen[key] = expires
        return True


class CommandGate:
    """Checks one parsed command (``controller.commands_schema``); ``check``
    returns None when it may go to the engine, else why not. A command that
    passes is remembered as taken."""

    def __init__(
        self,
        table: str,
        seen: SeenCommands,
        key: bytes | None = None,
        *,
        window_s: float = PAST_WINDOW_S,
        skew_s: float = FUTURE_SKEW_S,
    ) -> None:
        if key is not None and not key:
            raise ValueError("empty command key")
        self.table = table
        self._seen = seen
        self._key = key
        self.window_s = window_s
        self.skew_s = skew_s

    def check(self, cmd: Mapping[str, Any], now: float, payload: bytes | None = None) -> str | None:
        """``cmd`` as parsed from ``payload``, the bytes received (None: a
        command given as a dict, taken as sent by ``wire``). The signature
        is checked over ``payload`` as it is, before anything else."""
        sig, ts = cmd.get("sig"), cmd.get("ts")
        if self._key is not None:
            if not isinstance(sig, str) or ts is None:
                return "unauthenticated command: 'table', 'ts' and 'sig' are required"
            signed = signed_bytes(wire(cmd) if payload is None else payload)
            if signed is None or signed[1] != sig:
                return "unauthenticated command: 'sig' is not the last member of the bytes received"
            want = hmac.new(self._key, signed[0], hashlib.sha256).hexdigest()
            if not hmac.compare_digest(want, sig):
                return "unauthenticated command: bad signature"
            if "table" not in cmd:
                return "unauthenticated command: a signed command must name its 'table'"
        table = cmd.get("table")
        if table is not None and table != self.table:
            return f"command for table {table!r}: this controller is table {self.table!r}"
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            return "command without 'ts': every command must carry the sender's Unix time (seconds)"
        if ts < now - self.window_s:
            return f"stale command: 'ts' is more than {self.window_s:g} s behind the controller's clock"
        if ts > now + self.skew_s:
            ahead = f"more than {self.skew_s:g} s ahead of the controller's clock"
            return f"command from the future: 'ts' is {ahead}"
        if isinstance(sig, str):
            seen_key = sig
        else:
            seen_key = hashlib.sha256(self.table.encode() + b"\n" + canonical(cmd)).hexdigest()
        if not self._seen.remember_command(seen_key, float(ts) + self.window_s, now):
            return "replayed command: already taken"
        return None
