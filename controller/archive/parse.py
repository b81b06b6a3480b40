"""From an MQTT message to an archivable event, or a reason it is not one.

Pure (no I/O): ``classify`` decides whether a topic carries events at all
(docs/operations.md, MQTT: the retained ``status``, ``shoe/state`` and ``odds``
copies and the command topics do not), and ``parse`` checks a payload
against the event contract (docs/events.md) with stated bounds:

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
* the envelope: ``v`` 1, ``type`` a dotted lowercase name of at most 64
  characters, ``table`` a table id, ``shoe`` at most 64 characters or null,
  ``seq`` 0..2^63-1, ``ts`` RFC 3339 UTC, ``event_id`` exactly
  ``<table>/<shoe or ->/<seq>``, or for a replayed event (one with
  ``replay``: ``{"run": 32 hex digits, "source": 1..255 characters}``)
  exactly ``replay/<run>/<table>/<shoe or ->/<seq>``; the topic must be the
  event's own (``<prefix>/<table>/<type with / >``);
* the payload fields the typed tables hold, with their types.

``parse`` raises ``Invalid`` (one line) for every payload that is not such
an event, and nothing else (a property test feeds it every value JSON can
produce). An event that passes carries its canonical JSON (sorted keys, compact) and
that text's SHA-256: equal content, equal digest, whatever the key order
or spacing a producer used.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from controller.config import table_problem

#: Topic suffixes (after ``<prefix>/<table>/``) that carry no event.
#: ``archive/mark`` is the archivers' own retained mark (controller/archive/marks.py)
NON_EVENT_SUFFIXES: frozenset[str] = frozenset(
    {"status", "shoe/state", "odds", "cmd", "cmd/reply", "archive/mark"}
)

_TYPE_RE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
_TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
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
WINNERS = frozenset({"player", "banker", "tie"})
ACTIONS = frozenset({"corrected", "awaiting_supervisor", "void"})
DEVICE_STATES = frozenset({"online", "offline", "fault"})
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
    if not isinstance(obj, dict):
        raise Invalid(f"not an event: a JSON {type(obj).__name__}, not an object")
    canonical, data = _storable(obj)
    ev = _envelope(obj)
    expected = f"{prefix}/{ev['table']}/{ev['type'].replace('.', '/')}"
    if topic != expected:
        what = f"a {ev['type']} event of {ev['table']}"
        raise Invalid(f"published on {topic}, but {what} belongs on {expected}")
    typed = _typed(ev["type"], obj)
    if typed is not None and typed[0] == "coup_corrections":
        _same_side(typed[1]["supersedes"], ev["replay"])
    return Event(
        topic=topic,
        event_id=ev["event_id"],
        type=ev["type"],
        table=ev["table"],
        shoe=ev["shoe"],
        seq=ev["seq"],
        ts=ev["ts"],
        body=obj,
        canonical=canonical,
        digest=hashlib.sha256(data).digest(),
        typed=typed,
        replay=ev["replay"],
    )


def _storable(obj: dict[str, Any]) -> tuple[str, bytes]:
    """``obj``'s canonical JSON and its UTF-8, or ``Invalid`` naming the
    field past a bound. Cheap tests on the whole text first (in C); the
    exact walk over the values only when one of them may have tripped."""
    try:
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


def _int(obj: dict[str, Any], key: str, lo: int = 0, hi: int = MAX_SEQ, *, null: bool = False) -> Any:
    value = obj.get(key)
    if value is None and null:
        return None
    if type(value) is not int or not lo <= value <= hi:
        raise Invalid(f"{key}: must be an integer {lo}..{hi}{' or null' if null else ''}, not {value!r:.40}")
    return value


def _str(obj: dict[str, Any], key: str, hi: int = MAX_TEXT_CHARS, *, null: bool = False, lo: int = 0) -> Any:
    value = obj.get(key)
    if value is None and null:
        return None
    if not isinstance(value, str) or not lo <= len(value) <= hi:
        raise Invalid(f"{key}: must be a string of {lo}..{hi} characters, not {value!r:.40}")
    return value


def _bool(obj: dict[str, Any], key: str) -> bool:
    value = obj.get(key)
    if not isinstance(value, bool):
        raise Invalid(f"{key}: must be true or false, not {value!r:.40}")
    return value


def _choice(obj: dict[str, Any], key: str, allowed: frozenset[str]) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or value not in allowed:
        raise Invalid(f"{key}: must be one of {', '.join(sorted(allowed))}, not {value!r:.40}")
    return str(value)


def _strs(obj: dict[str, Any], key: str, *, null_items: bool = False) -> list[str | None]:
    value = obj.get(key)
    if not isinstance(value, list) or len(value) > 64:
        raise Invalid(f"{key}: must be a list (at most 64 items), not {value!r:.40}")
    for item in value:
        if item is None and null_items:
            continue
        if not isinstance(item, str) or len(item) > 64:
            raise Invalid(f"{key}: every item must be a string of at most 64 characters")
    return list(value)


def parse_ts(value: Any, key: str = "ts") -> dt.datetime:
    if not isinstance(value, str) or not _TS_RE.fullmatch(value):
        raise Invalid(f"{key}: must be RFC 3339 UTC such as 2026-11-22T06:56:11.125Z, not {value!r:.40}")
    try:
        return dt.datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError:
        raise Invalid(f"{key}: not a real time: {value!r}") from None


def _envelope(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("v") != 1 or type(obj.get("v")) is not int:
        raise Invalid(f"v: must be 1, not {obj.get('v')!r:.40}")
    etype = _str(obj, "type", MAX_TYPE_CHARS, lo=1)
    if not _TYPE_RE.fullmatch(etype):
        raise Invalid(f"type: not an event type: {etype!r}")
    table = obj.get("table")
    problem = table_problem(table) if isinstance(table, str) else "must be a string"
    if problem:
        raise Invalid(f"table: {problem}")
    shoe = _str(obj, "shoe", MAX_SHOE_CHARS, null=True, lo=1)
    seq = _int(obj, "seq")
    ts = parse_ts(obj.get("ts"))
    event_id = _str(obj, "event_id", 256, lo=1)
    run = _replay_run(obj)
    if run is not None:
        if event_id != f"replay/{run}/{table}/{shoe or '-'}/{seq}":
            what = "replay/<run>/<table>/<shoe>/<seq>"
            raise Invalid(f"event_id: {event_id!r:.80} is not {what} of this replayed event")
    elif event_id != f"{table}/{shoe or '-'}/{seq}":
        raise Invalid(f"event_id: {event_id!r:.80} is not <table>/<shoe>/<seq> of this event")
    return {
        "type": etype,
        "table": table,
        "shoe": shoe,
        "seq": seq,
        "ts": ts,
        "event_id": event_id,
        "replay": run,
    }


_RUN_RE = re.compile(r"[0-9a-f]{32}")


def _same_side(supersedes: str, run: str | None) -> None:
    """A live correction supersedes a live event (an id of two slashes), a
    replayed one an event of its own run: never across."""
    if run is None and supersedes.count("/") != 2:
        raise Invalid(f"supersedes: {supersedes!r:.80} is a replayed event's id, not this table's")
    if run is not None and not supersedes.startswith(f"replay/{run}/"):
        raise Invalid(f"supersedes: {supersedes!r:.80} is not an event of this replay run")


def _replay_run(obj: dict[str, Any]) -> str | None:
    """A replayed event's run, None for a live one (no ``replay`` key)."""
    if "replay" not in obj:
        return None
    mark = obj["replay"]
    if not isinstance(mark, dict) or set(mark) != {"run", "source"}:
        raise Invalid("replay: must be an object with run and source")
    run = mark["run"]
    if not isinstance(run, str) or not _RUN_RE.fullmatch(run):
        raise Invalid(f"replay.run: must be 32 lowercase hex digits, not {run!r:.40}")
    _str(mark, "source", 255, lo=1)
    return run


def _hand(obj: dict[str, Any], key: str) -> tuple[list[str | None], int]:
    hand = obj.get(key)
    if not isinstance(hand, dict):
        raise Invalid(f"{key}: must be an object with cards and total")
    try:
        return _strs(hand, "cards", null_items=True), _int(hand, "total", 0, 9)
    except Invalid as exc:
        raise Invalid(f"{key}.{exc}") from None


def _settlement(obj: dict[str, Any]) -> str | None:
    value = obj.get("settlement")
    if value is None:  # a demo coup is not settled
        return None
    if not isinstance(value, dict) or len(value) > 64:
        raise Invalid("settlement: must be an object of bet: net per unit")
    for bet, net in value.items():
        if len(bet) > 64 or type(net) not in (int, float) or not -1000 <= net <= 1000:
            raise Invalid(f"settlement.{bet:.64}: must be a number -1000..1000, not {net!r:.40}")
    return canonical_json(value)


_POSITIONS = frozenset({"P1", "B1", "P2", "B2", "P3", "B3"})
_EVENT_ID_RE = re.compile(r"(?:replay/[0-9a-f]{32}/)?[A-Za-z0-9_-]{1,32}/[^/]{1,64}/[0-9]{1,19}")


def _outcome(
    obj: dict[str, Any], pcards: list[str | None], ptotal: int, bcards: list[str | None], btotal: int
) -> dict[str, Any]:
    """A settled coup's hands and what they made: the columns ``coups``
    and ``coup_corrections`` share, checked in the same order for both."""
    return {
        "player_cards": pcards,
        "banker_cards": bcards,
        "player_total": ptotal,
        "banker_total": btotal,
        "winner": _choice(obj, "winner", WINNERS),
        "natural": _bool(obj, "natural"),
        "player_pair": _bool(obj, "player_pair"),
        "banker_pair": _bool(obj, "banker_pair"),
        "tags": _strs(obj, "tags"),
    }


def _corrected(obj: dict[str, Any]) -> dict[str, Any]:
    """A ``coup.corrected``: the corrected result (as ``coup.result``'s
    fields), the event it supersedes, the cards changed, reason and command."""
    pcards, ptotal = _hand(obj, "player")
    bcards, btotal = _hand(obj, "banker")
    settlement = _settlement(obj)
    if settlement is None:
        raise Invalid("settlement: a corrected coup is settled (an object of bet: net per unit)")
    supersedes = _str(obj, "supersedes", 256, lo=1)
    if not _EVENT_ID_RE.fullmatch(supersedes):
        raise Invalid(f"supersedes: {supersedes!r:.80} is not an event id")
    changes = obj.get("changes")
    if not isinstance(changes, list) or not 1 <= len(changes) <= 6:
        raise Invalid("changes: must be a list of 1 to 6 cards changed")
    for i, ch in enumerate(changes):
        if not isinstance(ch, dict) or set(ch) != {"position", "was", "card"}:
            raise Invalid(f"changes[{i}]: must be an object with position, was and card")
        try:
            _choice(ch, "position", _POSITIONS)
            _str(ch, "was", 2, lo=2)
            _str(ch, "card", 2, lo=2)
        except Invalid as exc:
            raise Invalid(f"changes[{i}].{exc}") from None
    command_id = obj.get("command_id")
    if isinstance(command_id, int) and not isinstance(command_id, bool):
        command_id = str(_int(obj, "command_id", MIN_INT, MAX_INT))
    else:
        command_id = _str(obj, "command_id", 128, lo=1)
    return {
        "coup": _int(obj, "coup", 0, 2**31 - 1),
        "supersedes": supersedes,
        **_outcome(obj, pcards, ptotal, bcards, btotal),
        "settlement": settlement,
        "changes": canonical_json(changes),
        "reason": _str(obj, "reason", 4096, lo=1),
        "command_id": command_id,
    }


def _typed(etype: str, obj: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    if etype == "coup.result":
        pcards, ptotal = _hand(obj, "player")
        bcards, btotal = _hand(obj, "banker")
        return "coups", {
            "coup": _int(obj, "coup", 0, 2**31 - 1),
            "demo": _bool(obj, "demo"),
            "void": False,
            "void_code": None,
            **_outcome(obj, pcards, ptotal, bcards, btotal),
            "settlement": _settlement(obj),
            "corrections": _strs(obj, "corrections"),
        }
    if etype == "coup.corrected":
        return "coup_corrections", _corrected(obj)
    if etype == "coup.void":
        return "coups", {
            "coup": _int(obj, "coup", 0, 2**31 - 1),
            "demo": bool(obj.get("demo", False)),
            "void": True,
            "void_code": _str(obj, "code", 64, lo=1),
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
    if etype == "misdeal":
        detail = _str(obj, "detail")
        action = _choice(obj, "action", ACTIONS)
        deadline = obj.get("deadline")
        return "misdeals", {
            "coup": _int(obj, "coup", 0, 2**31 - 1, null=True),
            "code": _str(obj, "code", 64, lo=1),
            "detail": detail,
            "action": action,
            "deadline": None if deadline is None else parse_ts(deadline, "deadline"),
            "supervisor": action != "awaiting_supervisor" and bool(_SUPERVISOR_RE.search(detail)),
        }
    if etype == "security.alert":
        detail = _str(obj, "detail")
        return "security_alerts", {
            "coup": _int(obj, "coup", 0, 2**31 - 1, null=True),
            "code": _str(obj, "code", 64, lo=1),
            "detail": detail,
            "supervisor": bool(_SUPERVISOR_RE.search(detail)),
        }
    if etype == "device.status":
        device = obj.get("device")
        if device is not None and not isinstance(device, dict):
            raise Invalid("device: must be an object or null")
        return "device_status", {
            "state": _choice(obj, "state", DEVICE_STATES),
            "code": _str(obj, "code", 64, null=True),
            "device": None if device is None else canonical_json(device),
        }
    if etype == "shoe.started":
        return "shoes.started", {
            "decks": _int(obj, "decks", 1, 12),
            "profile": _str(obj, "profile", 4096, lo=1),
            "shuffle_commit": _str(obj, "shuffle_commit", 128, null=True),
        }
    if etype == "shoe.ended":
        tally = obj.get("tally")
        if not isinstance(tally, dict):
            raise Invalid("tally: must be an object with player, banker and tie")
        try:
            counts = {k: _int(tally, k, 0, 2**31 - 1) for k in ("player", "banker", "tie")}
        except Invalid as exc:
            raise Invalid(f"tally.{exc}") from None
        return "shoes.ended", {
            "coups": _int(obj, "coups", 0, 2**31 - 1),
            "cards_dealt": _int(obj, "cards_dealt", 0, 2**31 - 1),
            "tally_player": counts["player"],
            "tally_banker": counts["banker"],
            "tally_tie": counts["tie"],
        }
    return None
