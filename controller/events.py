"""The event envelope (SPEC section 3): ids, timestamps, serialisation.

Events are plain dicts in a fixed key order (envelope first, then payload)
so that the same input always serialises to the same bytes.
"""

from __future__ import annotations

import json
import time
from typing import Any

SCHEMA_VERSION = 1

Event = dict[str, Any]

_sec_cache: dict[int, str] = {}


#: 9999-12-31T23:59:59.999Z: RFC 3339 has four-digit years; a later time
#: (a deadline computed near the end of the range) is written as this.
MAX_MS = 253_402_300_799_999


def format_ts(t: float) -> str:
    """RFC 3339 UTC with milliseconds: ``2026-11-22T06:56:11.125Z``."""
    ms = min(max(round(t * 1000), 0), MAX_MS)
    sec, milli = divmod(ms, 1000)
    head = _sec_cache.get(sec)
    if head is None:
        if len(_sec_cache) > 4096:
            _sec_cache.clear()
        head = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _sec_cache[sec] = head
    return f"{head}.{milli:03d}Z"


def shoe_id_for(t: float) -> str:
    """A shoe's id from the read time of its first frame: UTC to the second,
    e.g. ``20261122T065611Z``; unique per table in practice, and stable in
    replay because it comes from the capture's own timestamps."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(int(t)))


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# The C encoder json.JSONEncoder.encode builds afresh for every call, built
# once with the same settings (the same bytes; about 40% less time per
# event, and JSON is a quarter of a replay). No circular-reference markers:
# an event is a tree the engine has just built, and a cycle would still end
# in RecursionError, not a hang. None where CPython has no C accelerator.
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # not in typeshed
_c_encode: Any = (
    _c_make_encoder(
        None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if _c_make_encoder is not None
    else None
)


def dumps(event: Event) -> str:
    """Compact JSON, key order as built: byte-identical for identical events."""
    if _c_encode is not None:
        return "".join(_c_encode(event, 0))
    return _encoder.encode(event)


def net(x: Any) -> int | float:
    """A payout as JSON: an int where integral (8, -1, 0), else a float (0.95)."""
    if x == int(x):
        return int(x)
    return float(x)
