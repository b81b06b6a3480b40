"""The event envelope (docs/events.md): ids, timestamps, serialisation.

Events are plain dicts in a fixed key order (envelope first, then payload)
so that the same input always serialises to the same bytes. Their payloads
are typed (``controller.event_types``): ``payload_dict`` makes the dict of
one, and ``dumps`` writes an event with msgspec where that gives ``json``'s
bytes (every type whose definition holds no float) and ``json`` otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import msgspec

from controller.event_types import EVENT_TYPES, UNSET, Payload

SCHEMA_VERSION = 1

Event = dict[str, Any]

_minute_cache: dict[int, str] = {}
#: "00".."59" and ".000Z"..".999Z": a timestamp's seconds and its tail
_SECONDS = tuple(f"{n:02d}" for n in range(60))
_MILLIS = tuple(f".{n:03d}Z" for n in range(1000))


#: 9999-12-31T23:59:59.999Z: RFC 3339 has four-digit years; a later time
#: (a deadline computed near the end of the range) is written as this.
MAX_MS = 253_402_300_799_999


def format_ts(t: float) -> str:
    """RFC 3339 UTC with milliseconds: ``2026-11-22T06:56:11.125Z``."""
    # On every event: strftime once a minute (POSIX time has no leap
    # seconds, so every minute has 60), then two table lookups.
    ms = round(t * 1000)
    if ms < 0:
        ms = 0
    elif ms > MAX_MS:
        ms = MAX_MS
    minute = ms // 60000
    head = _minute_cache.get(minute)
    if head is None:
        if len(_minute_cache) > 4096:
            _minute_cache.clear()
        head = time.strftime("%Y-%m-%dT%H:%M:", time.gmtime(minute * 60))
        _minute_cache[minute] = head
    rest = ms - minute * 60000
    return head + _SECONDS[rest // 1000] + _MILLIS[rest % 1000]


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


def _slow_dumps(event: Event) -> str:
    if _c_encode is not None:
        return "".join(_c_encode(event, 0))
    return _encoder.encode(event)


_asdict: Callable[[Payload], dict[str, Any]] = msgspec.structs.asdict
#: per payload type, its fields that may be left UNSET (omitted)
_OPTIONAL: dict[type[Payload], tuple[str, ...]] = {
    p: tuple(f.name for f in msgspec.structs.fields(p) if not f.required) for p in EVENT_TYPES.values()
}


def payload_dict(payload: Payload) -> dict[str, Any]:
    """A payload as the dict consumers read: its fields in declared order,
    those left ``UNSET`` omitted. Shallow, as the dict literals it replaces
    were: nested dicts and lists are the engine's own, not copies."""
    out = _asdict(payload)
    for name in _OPTIONAL[type(payload)]:
        if out[name] is UNSET:
            del out[name]
    return out


_msgspec_encode = msgspec.json.Encoder().encode


def _float_free(tp: Any) -> bool:
    """True when no value of type ``tp`` can hold a float (or anything
    untyped): msgspec writes 1e-05 as 0.00001 and 1e+16 as 1e16 where
    ``json`` writes 1e-05 and 1e+16, so only such events take msgspec."""
    info = msgspec.inspect.type_info(tp)
    seen: set[int] = set()

    def walk(t: msgspec.inspect.Type) -> bool:
        if isinstance(t, msgspec.inspect.FloatType | msgspec.inspect.AnyType):
            return False
        if id(t) in seen:
            return True
        seen.add(id(t))
        if isinstance(t, msgspec.inspect.Metadata):
            return walk(t.type)
        if isinstance(t, msgspec.inspect.UnionType):
            return all(walk(x) for x in t.types)
        if isinstance(t, msgspec.inspect.ListType | msgspec.inspect.SetType):
            return walk(t.item_type)
        if isinstance(t, msgspec.inspect.DictType):
            return walk(t.key_type) and walk(t.value_type)
        if isinstance(t, msgspec.inspect.StructType | msgspec.inspect.TypedDictType):
            return all(walk(f.type) for f in t.fields)
        return isinstance(
            t,
            msgspec.inspect.IntType
            | msgspec.inspect.StrType
            | msgspec.inspect.BoolType
            | msgspec.inspect.NoneType
            | msgspec.inspect.LiteralType,
        )

    return walk(info)


#: The event types msgspec encodes with the bytes ``json`` gives.
FAST_TYPES = frozenset(name for name, p in EVENT_TYPES.items() if _float_free(p))


def _float_fields(p: type[Payload]) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(p) if not _float_free(f.type))


#: ``coup.result`` is written once per coup, and ``json`` takes about 7x
#: msgspec's time for it. Its definition holds floats only in
#: ``settlement`` (a payout, e.g. 0.95): between 1e-4 and 1e15 msgspec
#: and ``json`` write a finite float alike (the shortest repr, no
#: exponent; checked on 6.6 million values, boundaries included), and
#: outside it they differ (1e-05 against 0.00001, 1e+16 against 1e16). So
#: an event whose settlement values are ints, or floats in that range,
#: takes msgspec; any other (or any other shape) takes ``json``.
_RESULT_FLOATS = _float_fields(EVENT_TYPES["coup.result"])
if _RESULT_FLOATS != ("settlement",):  # pragma: no cover - a change of CoupResult's definition
    raise RuntimeError(f"coup.result holds floats in {_RESULT_FLOATS}: revisit events.dumps")


#: ``odds.update`` is written twice per coup, on the path of the next coup's
#: first card (``json`` takes about 9x msgspec's time). Its definition holds
#: floats only in ``bets`` (probabilities and expectations): such an event
#: whose floats are all 0 or within the range above takes msgspec too.
_ODDS_FLOATS = _float_fields(EVENT_TYPES["odds.update"])
if _ODDS_FLOATS != ("bets",):  # pragma: no cover - a change of OddsUpdate's definition
    raise RuntimeError(f"odds.update holds floats in {_ODDS_FLOATS}: revisit events.dumps")


def _plain_float(x: object) -> bool:
    """An int, or a float both encoders write alike: 0 (either sign) or
    between 1e-4 and 1e15 in magnitude (NaN and the infinities are not)."""
    if type(x) is float:
        return x == 0.0 or 1e-4 <= abs(x) < 1e15
    return type(x) is int


def _plain_bets(event: Event) -> bool:
    bets = event.get("bets")
    if type(bets) is not dict:
        return False
    for bet in bets.values():
        if type(bet) is not dict:
            return False
        if not all(_plain_float(x) for x in bet.values()):
            return False
    return True


def _plain_settlement(event: Event) -> bool:
    settlement = event.get("settlement")
    if settlement is None:
        return True
    if type(settlement) is not dict:
        return False
    return all(_plain_float(x) for x in settlement.values())


def dumps(event: Event) -> str:
    """Compact JSON, key order as built: byte-identical for identical events.

    msgspec (about 6x faster) for the types whose definition holds no float,
    and for ``coup.result`` and ``odds.update`` when their floats are
    written alike by both (see ``_plain_settlement``, ``_plain_bets``); the
    others (stats, floats outside that range) through ``json`` whose float
    format is the published one. Both write non-ASCII as UTF-8 and escape
    the same characters."""
    kind = event.get("type")
    if (
        kind in FAST_TYPES
        or (kind == "coup.result" and _plain_settlement(event))
        or (kind == "odds.update" and _plain_bets(event))
    ):
        try:
            return _msgspec_encode(event).decode()
        except (TypeError, OverflowError):
            pass  # a value msgspec cannot write (an int past 64 bits): json can
    return _slow_dumps(event)


def net(x: Any) -> int | float:
    """A payout as JSON: an int where integral (8, -1, 0), else a float (0.95)."""
    if x == int(x):
        return int(x)
    return float(x)
