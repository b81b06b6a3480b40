"""From an MQTT message to an archivable event, or a reason it is not one.

Pure (no I/O): ``classify`` decides whether a topic carries events at all
(docs/operations.md, MQTT: the retained ``status``, ``shoe/state`` and
``odds`` copies and the command topics do not), and ``parse`` reads a
payload with the event contract itself (docs/events.md),
``controller.event_types`` decoding strictly (``read_envelope``, then
``read_payload``: a tagged union on ``type``; fields it does not know, a
newer table's, are ignored, and an event of a type it does not know is
archived for its envelope), with stated bounds besides:

* at most ``max_payload_bytes`` (checked before anything is decoded);
* UTF-8 JSON, an object, nested at most ``MAX_DEPTH`` (32) arrays and
  objects deep (the object itself is level 1);
* every string, keys included: no NUL (PostgreSQL's ``text`` and ``jsonb``
  cannot hold one) and no lone surrogate (``"\\ud800"`` is valid JSON but
  not Unicode text: it has no UTF-8 form); other control characters are
  carried as they are (``jsonb`` keeps them escaped);
* every number: an integer within a signed 64-bit ``bigint``
  (-2^63..2^63-1), a float finite (no NaN/Infinity, and no literal such as
  ``1e400`` that only overflows to infinity); ``-0.0`` is carried;
* the envelope as defined (``v`` 1, ``table``, ``shoe``, ``seq``, ``ts``
  RFC 3339 UTC with milliseconds, ``event_id``, and the optional
  ``replay`` and signing fields), and: ``type`` a dotted lowercase name of
  at most 64 characters, ``shoe`` at most 64 characters, ``seq`` at most
  2^63-1, ``ts`` a real time, ``event_id`` exactly
  ``<table>/<shoe or ->/<seq>``, or for a replayed event (one with
  ``replay``: exactly ``{"run", "source"}``) exactly
  ``replay/<run>/<table>/<shoe or ->/<seq>``; the topic must be the
  event's own (``<prefix>/<table>/<type with / >``);
* the payload as defined, and what the typed tables' columns hold: a coup
  number at most 2^31-1 (counts too), a code 1..64 characters, a detail at
  most 4096, at most 64 tags, corrections and bets, a net of at most 1000
  per unit.

``parse`` raises ``Invalid`` (one line, the field first) for every payload
that is not such an event, and nothing else (a property test feeds it
every value JSON can produce). An event that passes carries its canonical
JSON (sorted keys, compact) and that text's SHA-256: equal content, equal
digest, whatever the key order or spacing a producer used.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import msgspec

from controller.event_types import (
    EVENT_TYPES,
    CoupCorrected,
    CoupResult,
    CoupVoid,
    DeviceStatus,
    EnvelopeRead,
    Misdeal,
    Payload,
    ReplayMark,
    SecurityAlert,
    ShoeEnded,
    ShoeStarted,
    problem,
    read_envelope,
    read_payload,
)

#: Topic suffixes (after ``<prefix>/<table>/``) that carry no event.
#: ``archive/mark`` is the archivers' own retained mark (controller/archive/marks.py)
NON_EVENT_SUFFIXES: frozenset[str] = frozenset(
    {"status", "shoe/state", "odds", "cmd", "cmd/reply", "archive/mark"}
)

_TYPE_RE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
MAX_TYPE_CHARS = 64
MAX_SHOE_CHARS = 64
MAX_SEQ = 2**63 - 1
MAX_TEXT_CHARS = 4096  # a detail, code or card field in a typed column
#: Arrays and objects nested in a payload, the payload itself level 1 (an
#: event has at most 4: ``roads``).
MAX_DEPTH = 32
#: Every integer in a payload fits a PostgreSQL ``bigint``.
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
#: 19 digits in a row (digits mapped to 9, then found): maybe an integer beyond a bigint.
_DIGITS = bytes.maketrans(b"0123456789", b"9" * 10)
_NINETEEN = b"9" * 19
#: A coup number, and a count, in a typed table's ``integer`` column.
MAX_COLUMN_INT = 2**31 - 1
#: A code (a misdeal's, an alert's, a device's) in a typed column.
MAX_CODE_CHARS = 64
#: Items of a list (tags, corrections) and bets of a settlement.
MAX_ITEMS = 64
#: A bet's net per unit staked, either way.
MAX_NET = 1000
#: The engine's wording for an effect of a supervisor's command (controller/engine/).
_SUPERVISOR_RE = re.compile(r"\bby supervisor\b|\bthe supervisor numbers\b")


#: The longest reason kept (a reject's, a log line's): quotes of the payload are cut.
MAX_REASON_CHARS = 1000


def printable(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` as one line a person can read and PostgreSQL can store: every
    character ``str.isprintable`` refuses (controls, NUL, lone surrogates,
    line separators) written as its Python escape, cut to ``limit``."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Invalid(ValueError):
    """The payload is not a valid event; the message says why (one
    printable line of at most ``MAX_REASON_CHARS``, whatever the payload held)."""

    def __init__(self, reason: str) -> None:
        super().__init__(printable(reason))


@dataclass(frozen=True)
class Event:
    topic: str
    event_id: str
    type: str
    table: str
    shoe: str | None
    seq: int
    ts: dt.datetime
    body: dict[str, Any]
    canonical: str
    digest: bytes
    #: The row for the typed table of this type (None: raw event only).
    typed: tuple[str, dict[str, Any]] | None = field(default=None, compare=False)
    #: A replayed event's run (its ``replay.run``): archived apart, in the
    #: ``replays`` schema (None: a live table's event).
    replay: str | None = None

    @property
    def month(self) -> dt.date:
        return dt.date(self.ts.year, self.ts.month, 1)


def classify(topic: str, prefix: str) -> str | None:
    """The table a topic's events belong to, or None for a topic that
    carries no events (retained snapshots, commands, anything else)."""
    head = prefix + "/"
    if not topic.startswith(head):
        return None
    rest = topic[len(head) :]
    table, sep, suffix = rest.partition("/")
    if not sep or not suffix or suffix in NON_EVENT_SUFFIXES:
        return None
    return table


def _reject_constant(name: str) -> Any:
    raise Invalid(f"not JSON: {name} is not a number")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def parse(topic: str, payload: bytes, *, prefix: str, max_bytes: int) -> Event:
    """The event in ``payload`` published on ``topic``; raises ``Invalid``."""
    if len(payload) > max_bytes:
        raise Invalid(f"oversized: {len(payload)} bytes, the bound is {max_bytes}")
    obj = _json(payload)
    if not isinstance(obj, dict):
        raise Invalid(f"not an event: a JSON {type(obj).__name__}, not an object")
    canonical, data = _storable(obj, _seen.floats)
    try:
        env = read_envelope(payload)
    except msgspec.MsgspecError as exc:
        raise Invalid(problem(exc, obj)) from None
    ts, run = _envelope(env, obj)
    expected = f"{prefix}/{env.table}/{env.type.replace('.', '/')}"
    if topic != expected:
        what = f"a {env.type} event of {env.table}"
        raise Invalid(f"published on {topic}, but {what} belongs on {expected}")
    typed = None
    if env.type in EVENT_TYPES:
        try:
            body = read_payload(payload)
        except msgspec.MsgspecError as exc:
            raise Invalid(problem(exc, obj)) from None
        typed = _typed(body, obj, run)
    return Event(
        topic=topic,
        event_id=env.event_id,
        type=env.type,
        table=env.table,
        shoe=env.shoe,
        seq=env.seq,
        ts=ts,
        body=obj,
        canonical=canonical,
        digest=hashlib.sha256(data).digest(),
        typed=typed,
        replay=run,
    )


class _Seen(threading.local):
    #: the last payload decoded had a float ``_canonical_fast`` may not
    #: write as ``json`` does (``_float``)
    floats = False


_seen = _Seen()


def _float(text: str) -> float:
    """A JSON float, as ``json`` reads it (correctly rounded, as msgspec);
    one msgspec writes otherwise than ``json`` noted (``events.dumps``: only
    0 and 1e-4 <= |x| < 1e15 are written alike)."""
    value = float(text)
    if not (value == 0.0 or 1e-4 <= abs(value) < 1e15):
        _seen.floats = True
    return value


_decode = msgspec.json.Decoder(float_hook=_float).decode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def _json(payload: bytes) -> Any:
    """The JSON value of ``payload`` (msgspec); when msgspec refuses it,
    the reason found the slower way (``json``, then ``check_values``) that
    names what and where (a lone surrogate, a number out of range...)."""
    _seen.floats = False
    try:
        return _decode(payload)
    except (msgspec.MsgspecError, RecursionError) as exc:
        first = exc
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except Invalid:
        raise
    except RecursionError:
        raise Invalid(f"not JSON: nested too deeply (the bound is {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # JSONDecodeError, and ints too long to convert
        raise Invalid(f"not JSON: {exc}") from None
    if isinstance(obj, dict):
        check_values(obj)
    if isinstance(first, RecursionError):
        raise Invalid(f"not JSON: nested too deeply (the bound is {MAX_DEPTH} levels)")
    raise Invalid(f"not JSON: {first}")


def _storable(obj: dict[str, Any], floats: bool = True) -> tuple[str, bytes]:
    """``obj``'s canonical JSON and its UTF-8, or ``Invalid`` naming the
    field past a bound. Cheap tests on the whole text first (in C); the
    exact walk over the values only when one of them may have tripped.
    ``floats`` false: ``obj`` holds no float msgspec writes otherwise than
    ``json`` (``_float``), so msgspec writes the same canonical text, some
    five times faster (``json`` escapes the same characters, sorts keys in
    the same order: tests/test_archive_poison.py checks it)."""
    if not floats:
        try:
            data = _encode_sorted(obj)
            canonical = data.decode()
        except (TypeError, OverflowError, ValueError):  # an integer past 64 bits: json writes it
            floats = True
    try:
        if floats:
            canonical = canonical_json(obj)
            data = canonical.encode()
    except ValueError:  # a float out of range, or a lone surrogate (UnicodeEncodeError)
        check_values(obj)
        raise Invalid("a value has no JSON or UTF-8 form") from None  # check_values names it first
    if "\\u0000" in canonical or _NINETEEN in data.translate(_DIGITS):
        check_values(obj)  # a NUL, or an integer of 19 digits or more: or only a string that looks so
    elif canonical.count("[") + canonical.count("{") > MAX_DEPTH:
        _check_depth(obj)  # more brackets than levels allowed: are they nested that deep?
    return canonical, data


def _check_depth(obj: dict[str, Any]) -> None:
    """``check_values``'s depth bound alone, level by level over the
    arrays and objects only (the leaves are already known good)."""
    level: list[tuple[Any, str]] = [(obj, "")]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            raise Invalid(f"{_shown(level[0][1])}: nested too deeply (the bound is {MAX_DEPTH} levels)")
        below: list[tuple[Any, str]] = []
        for value, where in level:
            if type(value) is dict:
                for key, item in value.items():
                    if type(item) is dict or type(item) is list:
                        below.append((item, where or key))
            else:
                below.extend((item, where) for item in value if type(item) is dict or type(item) is list)
        level = below
        depth += 1


def check_values(obj: dict[str, Any]) -> None:
    """Raise ``Invalid`` unless every value in ``obj`` is storable: the
    depth, string and number bounds of the module docstring. Iterative,
    so its own depth is not Python's stack."""
    stack: list[tuple[Any, int, str]] = [(obj, 1, "")]
    while stack:
        value, depth, where = stack.pop()
        kind = type(value)
        if kind is str:
            _check_str(value, where)
        elif kind is dict:
            if depth > MAX_DEPTH:
                raise Invalid(f"{_shown(where)}: nested too deeply (the bound is {MAX_DEPTH} levels)")
            for key, item in value.items():
                _check_str(key, where or key)
                stack.append((item, depth + 1, where or key))
        elif kind is list:
            if depth > MAX_DEPTH:
                raise Invalid(f"{_shown(where)}: nested too deeply (the bound is {MAX_DEPTH} levels)")
            stack.extend((item, depth + 1, where) for item in value)
        elif kind is int and not MIN_INT <= value <= MAX_INT:
            digits = len(str(abs(value)))
            raise Invalid(f"{_shown(where)}: an integer of {digits} digits, beyond a bigint (-2^63..2^63-1)")
        elif kind is float and not math.isfinite(value):
            raise Invalid(f"{_shown(where)}: a number out of range ({value}), not finite")
        # bool and None: nothing to check


def _check_str(value: str, where: str) -> None:
    if "\x00" in value:
        raise Invalid(f"{_shown(where)}: a string holds a NUL character (not storable in PostgreSQL)")
    found = _SURROGATE_RE.search(value)
    if found:
        code = ord(found.group())
        raise Invalid(f"{_shown(where)}: a string holds a lone surrogate U+{code:04X} (not Unicode text)")


def _shown(where: str) -> str:
    """A field name for a reason (``Invalid`` escapes what is not printable)."""
    return printable(where, 64) or "the event"


def _most(value: int, key: str, hi: int = MAX_COLUMN_INT) -> int:
    """``value`` (an integer the contract takes) within a column's bound."""
    if value > hi:
        raise Invalid(f"{key}: must be an integer of at most {hi}, not {value}")
    return value


def _text(value: str, key: str, hi: int, lo: int = 0) -> str:
    """``value`` (a string the contract takes) within a column's bound."""
    if not lo <= len(value) <= hi:
        raise Invalid(f"{key}: must be a string of {lo}..{hi} characters, not {value!r:.40}")
    return value


def _texts(values: list[str], key: str) -> list[str]:
    if len(values) > MAX_ITEMS or any(len(v) > 64 for v in values):
        raise Invalid(f"{key}: must be a list of at most {MAX_ITEMS} strings of at most 64 characters")
    return values


def parse_ts(value: str, key: str = "ts") -> dt.datetime:
    """A time the contract's pattern took, as a datetime (UTC); ``Invalid``
    when it names no real time (a 13th month)."""
    try:
        return dt.datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError:
        raise Invalid(f"{key}: not a real time: {value!r}") from None


#: The members of a replayed event's mark, exactly.
_MARK = frozenset(ReplayMark.__annotations__)


def _envelope(env: EnvelopeRead, obj: dict[str, Any]) -> tuple[dt.datetime, str | None]:
    """What the envelope's definition does not say: its bounds, and that
    ``event_id`` is this event's own. The time, and a replay's run."""
    etype = env.type
    if not 0 < len(etype) <= MAX_TYPE_CHARS or not _TYPE_RE.fullmatch(etype):
        raise Invalid(f"type: not an event type: {etype!r:.80}")
    shoe = env.shoe
    if shoe is not None and len(shoe) > MAX_SHOE_CHARS:
        raise Invalid(f"shoe: must be a string of 1..{MAX_SHOE_CHARS} characters or null, not {shoe!r:.40}")
    _most(env.seq, "seq", MAX_SEQ)
    ts = parse_ts(env.ts)
    run = None
    if "replay" in obj:
        if set(obj["replay"]) != _MARK:
            raise Invalid("replay: must be an object with run and source")
        run = env.replay["run"] if env.replay else None
    own = f"{env.table}/{shoe or '-'}/{env.seq}"
    if run is not None:
        if env.event_id != f"replay/{run}/{own}":
            what = "replay/<run>/<table>/<shoe>/<seq>"
            raise Invalid(f"event_id: {env.event_id!r:.80} is not {what} of this replayed event")
    elif env.event_id != own:
        raise Invalid(f"event_id: {env.event_id!r:.80} is not <table>/<shoe>/<seq> of this event")
    return ts, run


def _same_side(supersedes: str, run: str | None) -> None:
    """A live correction supersedes a live event (an id of two slashes), a
    replayed one an event of its own run: never across."""
    if run is None and supersedes.count("/") != 2:
        raise Invalid(f"supersedes: {supersedes!r:.80} is a replayed event's id, not this table's")
    if run is not None and not supersedes.startswith(f"replay/{run}/"):
        raise Invalid(f"supersedes: {supersedes!r:.80} is not an event of this replay run")


def _settlement(value: dict[str, float] | None, raw: Any) -> str | None:
    """A settlement within the column's bounds, as the canonical JSON of
    what was sent (``raw``: an integral net stays an integer)."""
    if value is None:  # a demo coup is not settled
        return None
    if len(value) > MAX_ITEMS:
        raise Invalid(f"settlement: must be an object of at most {MAX_ITEMS} bets")
    for bet, net in value.items():
        if net > MAX_NET:
            raise Invalid(f"settlement.{bet}: must be a number -1..{MAX_NET}, not {net!r:.40}")
    return canonical_json(raw)


#: The longest id a ``supersedes`` names: a table's id, a shoe's, a seq.
_EVENT_ID_RE = re.compile(r"(?:replay/[0-9a-f]{32}/)?[A-Za-z0-9_-]{1,32}/[^/]{1,64}/[0-9]{1,19}")


def _outcome(p: CoupResult | CoupCorrected, obj: dict[str, Any]) -> dict[str, Any]:
    """A settled coup's hands and what they made: the columns ``coups``
    and ``coup_corrections`` share."""
    return {
        "player_cards": p.player["cards"],
        "banker_cards": p.banker["cards"],
        "player_total": p.player["total"],
        "banker_total": p.banker["total"],
        "winner": p.winner,
        "natural": p.natural,
        "player_pair": p.player_pair,
        "banker_pair": p.banker_pair,
        "tags": _texts(list(p.tags), "tags"),
        "settlement": _settlement(p.settlement, obj.get("settlement")),
    }


def _typed(p: Payload, obj: dict[str, Any], run: str | None) -> tuple[str, dict[str, Any]] | None:
    """The row of the typed table for ``p`` (None: its type has none),
    read from the payload decoded; a JSON column from what was sent."""
    if isinstance(p, CoupResult):
        return "coups", {
            "coup": _most(p.coup, "coup"),
            "demo": p.demo,
            "void": False,
            "void_code": None,
            **_outcome(p, obj),
            "corrections": _texts(p.corrections, "corrections"),
        }
    if isinstance(p, CoupCorrected):
        if not _EVENT_ID_RE.fullmatch(p.supersedes):
            raise Invalid(f"supersedes: {p.supersedes!r:.80} is not an event id")
        _same_side(p.supersedes, run)
        return "coup_corrections", {
            "coup": _most(p.coup, "coup"),
            "supersedes": p.supersedes,
            **_outcome(p, obj),
            "changes": canonical_json(obj["changes"]),
            "reason": p.reason,
            "command_id": str(p.command_id),
        }
    if isinstance(p, CoupVoid):
        return "coups", {
            "coup": _most(p.coup, "coup"),
            "demo": bool(obj.get("demo", False)),
            "void": True,
            "void_code": _text(p.code, "code", MAX_CODE_CHARS, 1),
            "player_cards": None,
            "banker_cards": None,
            "player_total": None,
            "banker_total": None,
            "winner": None,
            "natural": None,
            "player_pair": None,
            "banker_pair": None,
            "tags": [],
            "settlement": None,
            "corrections": [],
        }
    if isinstance(p, Misdeal):
        return "misdeals", {
            "coup": _most(p.coup, "coup"),
            "code": _text(p.code, "code", MAX_CODE_CHARS, 1),
            "detail": _text(p.detail, "detail", MAX_TEXT_CHARS),
            "action": p.action,
            "deadline": None if p.deadline is None else parse_ts(p.deadline, "deadline"),
            "supervisor": p.action != "awaiting_supervisor" and bool(_SUPERVISOR_RE.search(p.detail)),
        }
    if isinstance(p, SecurityAlert):
        return "security_alerts", {
            "coup": None if p.coup is None else _most(p.coup, "coup"),
            "code": _text(p.code, "code", MAX_CODE_CHARS, 1),
            "detail": _text(p.detail, "detail", MAX_TEXT_CHARS),
            "supervisor": bool(_SUPERVISOR_RE.search(p.detail)),
        }
    if isinstance(p, DeviceStatus):
        return "device_status", {
            "state": p.state,
            "code": _text(p.code, "code", MAX_CODE_CHARS),
            "device": canonical_json(obj["device"]),
        }
    if isinstance(p, ShoeStarted):
        return "shoes.started", {
            "decks": p.decks,
            "profile": _text(p.profile, "profile", MAX_TEXT_CHARS, 1),
            "shuffle_commit": p.shuffle_commit,
        }
    if isinstance(p, ShoeEnded):
        return "shoes.ended", {
            "coups": _most(p.coups, "coups"),
            "cards_dealt": _most(p.cards_dealt, "cards_dealt"),
            "tally_player": _most(p.tally["player"], "tally.player"),
            "tally_banker": _most(p.tally["banker"], "tally.banker"),
            "tally_tie": _most(p.tally["tie"], "tally.tie"),
        }
    return None
