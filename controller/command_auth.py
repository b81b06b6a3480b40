"""The daemon's own check of a command's origin (besides the broker's ACL).

MQTT does not tell a subscriber who published a message, so with
``outputs.mqtt.command_key_file`` set, a supervisor command must carry
``ts`` (Unix seconds) and ``sig``: the HMAC-SHA256, with the shared key, of
the command's canonical JSON without ``sig`` (keys sorted, no spaces).
A command that is unsigned, wrongly signed, more than ``window_s`` away
from the controller's clock, or a replay of one already taken is refused
with an error reply and a ``security.alert`` (COMMAND_REJECTED).
``shoe-controller ctl`` signs its commands when its config has the key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import OrderedDict
from typing import Any


def canonical(cmd: dict[str, Any]) -> bytes:
    body = {k: v for k, v in cmd.items() if k != "sig"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(cmd: dict[str, Any], key: bytes, now: float) -> dict[str, Any]:
    signed = {**cmd, "ts": round(now, 3)}
    signed["sig"] = hmac.new(key, canonical(signed), hashlib.sha256).hexdigest()
    return signed


class CommandVerifier:
    def __init__(self, key: bytes, window_s: float = 300.0, remember: int = 10_000) -> None:
        if not key:
            raise ValueError("empty command key")
        self._key = key
        self.window_s = window_s
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._remember = remember

    def check(self, cmd: dict[str, Any], now: float) -> str | None:
        """None if the command is authentic and fresh, else why not."""
        sig, ts = cmd.get("sig"), cmd.get("ts")
        if not isinstance(sig, str) or ts is None:
            return "unauthenticated command: 'ts' and 'sig' are required"
        want = hmac.new(self._key, canonical(cmd), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, sig):
            return "unauthenticated command: bad signature"
        if not isinstance(ts, (int, float)) or abs(now - float(ts)) > self.window_s:
            return f"stale command: 'ts' is more than {self.window_s:g} s from the controller's clock"
        if sig in self._seen:
            return "replayed command: already taken"
        self._seen[sig] = now
        while len(self._seen) > self._remember:
            self._seen.popitem(last=False)
        return None


def read_key(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read().strip()
