"""Supervisor commands as they arrive on ``<prefix>/<table>/cmd`` (docs/operations.md,
MQTT): strict parsing and validation, nothing else.

Pure (no I/O, no engine) so it can be fuzzed: ``parse_command`` either
returns a typed, normalised command (a ``msgspec.Struct`` per command;
``command_dict`` gives it back as JSON) or raises ``CommandError`` whose message
is the ``error`` of the reply. A command that does not parse changes
nothing.

Accepted shapes (every other key is an error, so a typo is not ignored)::

    {"id": ID, "cmd": "void",       "coup": N, "reason": "..."}
    {"id": ID, "cmd": "enter_card", "coup": N, "card": "TD", "confirm": true}
    {"id": ID, "cmd": "accept",     "coup": N, "confirm": true}
    {"id": ID, "cmd": "new_shoe"}
    {"id": ID, "cmd": "end_shoe"}
    {"id": ID, "cmd": "correct",    "coup": N, "cards": {"P1": "9H", ...}, "reason": "...",
     "confirm": true}

``ID`` is a non-empty string (at most 128 characters) or a 64-bit integer; it is
echoed in the reply. ``coup`` is an integer from 1 to 1000; ``card`` a card code
(normalised: ``"td"``, ``"10D"`` -> ``"TD"``). Every string field is one line
of text (``controller.textsafe.ONE_LINE_RULE``): a lone surrogate (valid JSON,
but no UTF-8 can carry it), a control character or a line separator is
refused, naming the field.

Every command also carries ``ts`` (the sender's Unix time, a finite
number) and may carry ``table`` (the table it is meant for) and ``sig``
(its HMAC): ``controller.command_auth`` checks them against the clock, the
controller's table and the key; here only their shapes are checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from msgspec import UNSET, Meta, Struct, UnsetType

from controller.cards import CardError, parse_card
from controller.event_types import TABLE_PATTERN
from controller.textsafe import ONE_LINE_RULE, one_line_problem

MAX_PAYLOAD = 4096
#: A command as the daemon journalled it (its own ``_alert`` carries a
#: free-text detail): read back at rebuild with this bound instead.
MAX_JOURNALLED = 65536
MAX_ID = 128
MAX_REASON = 500
#: The daemon's own commands' texts (an alert's detail, a refusal's error).
MAX_TEXT = 8192
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
    "correct": ("coup", "cards", "reason"),
}
#: The fields a command may carry besides those it must.
OPTIONAL: dict[str, tuple[str, ...]] = {"correct": ("confirm",)}
# an entry with consequences beyond the entered card (a dealt card set
# aside, a coup voided or renumbered) applies only with ``confirm`` true
OPTIONAL.update({"enter_card": ("confirm",), "accept": ("confirm",)})
#: The positions a correction may name (``coup.result``'s hands, P1 B1 P2 B2 P3 B3).
HAND_POSITIONS = ("P1", "B1", "P2", "B2", "P3", "B3")

CommandId = str | int


class CommandError(ValueError):
    """A command that cannot be carried out as sent, whether it does not
    parse (here) or cannot apply (the engine): the one error type of a
    command. ``command_id`` is the sender's id when it could be read (else
    None), for the reply."""

    def __init__(self, message: str, command_id: CommandId | None = None) -> None:
        super().__init__(message)
        self.command_id = command_id


# ------------------------------------------------------------ typed commands

IdField = (
    Annotated[str, Meta(min_length=1, max_length=MAX_ID)] | Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
)
CoupField = Annotated[int, Meta(ge=1, le=MAX_COUP)]
_CONFIRM = (
    "true: apply an entry whose consequences go beyond the entered card (a dealt card set aside,"
    " a coup voided, coups counted lost whole); without it such an entry is not applied and the"
    " reply says what it would do"
)


class _Command(Struct, kw_only=True, forbid_unknown_fields=True, tag_field="cmd"):
    """Base of every command; the tag (``cmd``) is its name."""

    NAME: ClassVar[str]


class SupervisorCommand(_Command, kw_only=True, forbid_unknown_fields=True):
    """A command from ``<prefix>/<table>/cmd`` (docs/operations.md, MQTT), parsed."""

    id: IdField
    table: (
        Annotated[
            str,
            Meta(
                pattern=TABLE_PATTERN,
                description="the table the command is meant for; required (and signed) with signed commands",
            ),
        ]
        | UnsetType
    ) = UNSET
    ts: (
        Annotated[
            float,
            Meta(
                ge=0,
                lt=MAX_TS,
                description="the sender's Unix time in seconds; the controller refuses a command without it,"
                " more than 300 s old or more than 5 s ahead, or already taken",
            ),
        ]
        | UnsetType
    ) = UNSET
    sig: (
        Annotated[
            str,
            Meta(
                pattern="^[0-9a-f]{64}$",
                description="HMAC-SHA256 of the bytes sent without this member, which is their last:"
                ' the payload ends in ,"sig":"<64 hex>"} and was signed with } in their place'
                " (table and ts included)",
            ),
        ]
        | UnsetType
    ) = UNSET


class Void(SupervisorCommand, tag="void", kw_only=True, forbid_unknown_fields=True):
    NAME: ClassVar[str] = "void"
    coup: CoupField
    reason: Annotated[str, Meta(max_length=MAX_REASON)]


class EnterCard(SupervisorCommand, tag="enter_card", kw_only=True, forbid_unknown_fields=True):
    NAME: ClassVar[str] = "enter_card"
    coup: CoupField
    #: normalised (``"10d"`` -> ``"TD"``); any spelling parse_card takes is sent
    card: str
    confirm: Annotated[bool, Meta(description=_CONFIRM)] | UnsetType = UNSET


class Accept(SupervisorCommand, tag="accept", kw_only=True, forbid_unknown_fields=True):
    NAME: ClassVar[str] = "accept"
    coup: CoupField
    confirm: Annotated[bool, Meta(description=_CONFIRM)] | UnsetType = UNSET


class EnterCardAsTaken(EnterCard, tag="enter_card", kw_only=True, forbid_unknown_fields=True):
    """An ``enter_card`` journalled before entries were checked against the
    shoe's evidence and confirmed (it has no ``confirm``): re-fed as it was
    taken then, unchecked, so that a rebuild reproduces its events."""


class AcceptAsTaken(Accept, tag="accept", kw_only=True, forbid_unknown_fields=True):
    """An ``accept`` journalled before that change: re-fed as it was taken."""


#: The journalled entries re-fed as they were taken (``parse_journalled``).
AS_TAKEN = (EnterCardAsTaken, AcceptAsTaken)


class NewShoe(SupervisorCommand, tag="new_shoe", kw_only=True, forbid_unknown_fields=True):
    NAME: ClassVar[str] = "new_shoe"


class EndShoe(SupervisorCommand, tag="end_shoe", kw_only=True, forbid_unknown_fields=True):
    NAME: ClassVar[str] = "end_shoe"


class Correct(SupervisorCommand, tag="correct", kw_only=True, forbid_unknown_fields=True):
    """A settled coup's cards corrected (``coup.corrected``): applied only
    with ``confirm`` true; without it the reply says what it would do."""

    NAME: ClassVar[str] = "correct"
    coup: CoupField
    #: position (P1 B1 P2 B2 P3 B3) -> card code (normalised, ``"9h"`` -> ``"9H"``);
    #: 1 to 6 of them, each position once
    cards: Annotated[
        dict[Literal["P1", "B1", "P2", "B2", "P3", "B3"], str],
        Meta(
            min_length=1,
            max_length=len(HAND_POSITIONS),
            extra_json_schema={"propertyNames": {"enum": list(HAND_POSITIONS)}},
        ),
    ]
    reason: Annotated[str, Meta(min_length=1, max_length=MAX_REASON)]
    confirm: (
        Annotated[
            bool,
            Meta(
                description="true: apply the correction; without it nothing changes and the reply says"
                " what it would do (the corrected hands, winner and settlement against the current ones)"
            ),
        ]
        | UnsetType
    ) = UNSET


class Reject(_Command, tag="_reject", kw_only=True, forbid_unknown_fields=True):
    """The daemon refused a supervisor's command (origin, table, freshness,
    once-only): journalled so that a rebuild reproduces its alert."""

    NAME: ClassVar[str] = "_reject"
    id: IdField | None
    error: str


class Alert(_Command, tag="_alert", kw_only=True, forbid_unknown_fields=True):
    """An alert the daemon raises itself (journal lost history, an output
    failing or restored); ``seq_above`` starts a new epoch of event seqs."""

    NAME: ClassVar[str] = "_alert"
    id: None = None
    code: str
    detail: str
    seq_above: int | UnsetType = UNSET


class Refused(_Command, tag="_refused", kw_only=True, forbid_unknown_fields=True):
    """The daemon's one alert per window for the commands it refused after
    the first and those dropped over its bounds."""

    NAME: ClassVar[str] = "_refused"
    refused: int
    dropped: int
    window_s: float
    limits: str


#: A supervisor's command, as ``parse_command`` returns it.
Command = Void | EnterCard | Accept | NewShoe | EndShoe | Correct
#: What the engine applies: a supervisor's command or one of the daemon's own.
EngineCommand = Command | Reject | Alert | Refused

_BY_NAME: dict[str, type[_Command]] = {
    c.NAME: c for c in (Void, EnterCard, Accept, NewShoe, EndShoe, Correct, Reject, Alert, Refused)
}
#: The order a command's fields are written in (the journal's JSON, the
#: HMAC's canonical form sorts them anyway).
_ORDER = ("id", "cmd", "coup", "card", "cards", "table", "ts", "sig", "reason", "confirm")


def command_dict(cmd: EngineCommand) -> dict[str, Any]:
    """The command as a JSON object: what the journal stores and what the
    gate's HMAC is computed over (fields left out stay out)."""
    out: dict[str, Any] = {}
    if not isinstance(cmd, Refused):
        out["id"] = cmd.id
    out["cmd"] = cmd.NAME
    for name in cmd.__struct_fields__:
        value = getattr(cmd, name)
        if value is not UNSET and name != "id":
            out[name] = value
    if isinstance(cmd, SupervisorCommand):
        out = {k: out[k] for k in sorted(out, key=lambda k: _ORDER.index(k))}
    return out


def command_json(cmd: EngineCommand) -> bytes:
    """Compact JSON of ``command_dict``: the journal's record of a command.
    An ``enter_card`` or ``accept`` is journalled with its ``confirm``, null
    when not sent (read back as not sent): one journalled without it was
    taken before entries were confirmed, and is re-fed as taken then
    (``parse_journalled``)."""
    out = command_dict(cmd)
    if isinstance(cmd, EnterCard | Accept) and not isinstance(cmd, AS_TAKEN) and "confirm" not in out:
        out["confirm"] = None
    return json.dumps(out, separators=(",", ":")).encode()


# ------------------------------------------------------------------ parsing


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CommandError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise CommandError(f"{name} is not JSON")


def _one_line(
    value: str, field: str, cid: CommandId | None = None, cmd: str = "", *, journalled: bool = False
) -> str:
    """``value`` if it is one line of text, else the refusal naming ``field``.
    ``journalled``: a command the daemon took and journalled before commands
    were held to one line is read back as it was taken, control
    characters included (its events are stored, and the outputs escape
    them); only a lone surrogate is refused, which no journal could store
    with its events."""
    problem = one_line_problem(value)
    if problem is not None and journalled and "surrogate" not in problem:
        problem = None
    if problem is not None:
        where = f"{cmd}: " if cmd else ""
        raise CommandError(f"{where}{field!r} must be {ONE_LINE_RULE}; {problem}", cid)
    return value


def _command_id(value: Any, *, journalled: bool = False) -> CommandId:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise CommandError("'id' must be a string or an integer")
    if isinstance(value, str) and not 0 < len(value) <= MAX_ID:
        raise CommandError(f"'id' must be 1 to {MAX_ID} characters")
    if isinstance(value, str):
        _one_line(value, "id", journalled=journalled)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise CommandError("an integer 'id' must fit in 64 bits (signed)")
    return value


def _coup(value: Any, cid: CommandId) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUP:
        raise CommandError(f"'coup' must be an integer from 1 to {MAX_COUP}", cid)
    return value


def _load(payload: bytes, limit: int) -> Any:
    if len(payload) > limit:
        raise CommandError(f"command larger than {limit} bytes")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError("command is not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except CommandError:
        raise
    except (ValueError, RecursionError) as exc:
        raise CommandError(f"command is not valid JSON: {exc}") from None


def parse_command(payload: bytes) -> Command:
    """Parse and validate one supervisor command payload; raises ``CommandError``."""
    data = _load(payload, MAX_PAYLOAD)
    if not isinstance(data, dict):
        raise CommandError("command must be a JSON object")
    return _supervisor(data)


class Received(NamedTuple):
    """A supervisor's command as it arrived: parsed, and the bytes received
    (what its signature covers, and what the journal keeps)."""

    cmd: Command
    payload: bytes


def parse_journalled(payload: bytes, *, received: bool = False) -> EngineCommand:
    """A command as the daemon journalled it: a supervisor's, checked by
    the same rules as ``parse_command``, or one of the daemon's own
    (``_reject``, ``_alert``, ``_refused``). ``received``: the bytes as
    they arrived (``Received.payload``), read as ``parse_command`` read
    them; otherwise the daemon's ``command_json``, where an entry without
    ``confirm`` was taken before confirming existed (``_entry``)."""
    data = _load(payload, MAX_JOURNALLED)
    if not isinstance(data, dict):
        raise CommandError("command must be a JSON object")
    name = data.get("cmd")
    if received and not (isinstance(name, str) and name.startswith("_")):
        return _supervisor(data, journalled=True, as_sent=True)
    return command_from_dict(data, journalled=True)


def command_from_dict(data: Mapping[str, Any], *, journalled: bool = False) -> EngineCommand:
    """A command given as a JSON object (journal, tests, tools): the same
    checks as ``parse_command``, the daemon's own commands included
    (``journalled``: read back from the journal, see ``_one_line``)."""
    name = data.get("cmd")
    if isinstance(name, str) and name.startswith("_"):
        return _internal(name, data)
    return _supervisor(data, journalled=journalled)


def _text(data: Mapping[str, Any], name: str, cmd: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise CommandError(f"{cmd}: {name!r} must be a string of at most {MAX_TEXT} characters")
    return value


def _count(data: Mapping[str, Any], name: str, cmd: str) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise CommandError(f"{cmd}: {name!r} must be a count")
    return value


def _internal(name: str, data: Mapping[str, Any]) -> EngineCommand:
    fields = {
        "_reject": ("id", "error"),
        "_alert": ("id", "code", "detail", "seq_above"),
        "_refused": ("refused", "dropped", "window_s", "limits"),
    }.get(name)
    if fields is None:
        raise CommandError(f"unknown command {name!r}")
    extra = sorted(set(data) - {"cmd", *fields})
    if extra:
        raise CommandError(f"{name}: unknown field {extra[0]!r}")
    if name == "_reject":
        cid = data.get("id")
        return Reject(
            id=None if cid is None else _command_id(cid, journalled=True), error=_text(data, "error", name)
        )
    if name == "_alert":
        if data.get("id") is not None:
            raise CommandError(f"{name}: 'id' must be null")
        alert = Alert(code=_text(data, "code", name), detail=_text(data, "detail", name))
        if "seq_above" in data:
            alert.seq_above = _count(data, "seq_above", name)
        return alert
    window = data.get("window_s")
    if isinstance(window, bool) or not isinstance(window, int | float) or not 0 <= window < MAX_TS:
        raise CommandError(f"{name}: 'window_s' must be a number of seconds")
    return Refused(
        refused=_count(data, "refused", name),
        dropped=_count(data, "dropped", name),
        window_s=window,
        limits=_text(data, "limits", name),
    )


def _supervisor(data: Mapping[str, Any], *, journalled: bool = False, as_sent: bool = False) -> Command:
    if "id" not in data:
        raise CommandError("missing 'id'")
    cid = _command_id(data["id"], journalled=journalled)
    cmd = data.get("cmd")
    if cmd is None:
        raise CommandError("missing 'cmd'", cid)
    if isinstance(cmd, str):
        _one_line(cmd, "cmd", cid, journalled=journalled)
    if not isinstance(cmd, str) or cmd not in COMMANDS:
        raise CommandError(f"unknown cmd {cmd!r} (one of {', '.join(COMMANDS)})", cid)
    fields = COMMANDS[cmd]
    extra = sorted(set(data) - {"id", "cmd", "table", "ts", "sig", *fields, *OPTIONAL.get(cmd, ())})
    if extra:
        raise CommandError(f"{cmd}: unknown field {extra[0]!r}", cid)
    for name in fields:
        if name not in data:
            raise CommandError(f"{cmd}: missing {name!r}", cid)
    coup = _coup(data["coup"], cid) if "coup" in fields else 0
    card = ""
    if "card" in fields:
        raw = data["card"]
        if not isinstance(raw, str):
            raise CommandError(f"{cmd}: 'card' must be a card code such as 'TD'", cid)
        _one_line(raw, "card", cid, cmd, journalled=journalled)
        try:
            card = parse_card(raw)
        except CardError as exc:
            raise CommandError(f"{cmd}: {exc}", cid) from None
    table: str | UnsetType = UNSET
    if "table" in data:
        # imported here: the engine imports the command types, and the
        # config (pydantic, the drivers' settings) is no part of it
        from controller.config import table_problem

        t = data["table"]
        if isinstance(t, str):
            _one_line(t, "table", cid, cmd, journalled=journalled)
        if not isinstance(t, str) or table_problem(t) is not None:
            raise CommandError(f"{cmd}: 'table' must be a table name ([A-Za-z0-9_-], 1 to 32)", cid)
        table = t
    ts: float | UnsetType = UNSET
    if "ts" in data:
        ts = data["ts"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts < MAX_TS:
            raise CommandError(f"{cmd}: 'ts' must be Unix seconds (a number from 0 to {MAX_TS:g})", cid)
    sig: str | UnsetType = UNSET
    if "sig" in data:
        sig = data["sig"]
        if isinstance(sig, str):
            _one_line(sig, "sig", cid, cmd, journalled=journalled)
        if not isinstance(sig, str) or not re.fullmatch(r"[0-9a-f]{64}", sig):
            raise CommandError(f"{cmd}: 'sig' must be 64 lower-case hex digits (HMAC-SHA256)", cid)
    reason = ""
    if "reason" in fields:
        reason = data["reason"]
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            raise CommandError(f"{cmd}: 'reason' must be a string of at most {MAX_REASON} characters", cid)
        _one_line(reason, "reason", cid, cmd, journalled=journalled)
    if cmd == "correct":
        return _correct(data, cid, coup, reason, table, ts, sig, journalled=journalled)
    if cmd == "void":
        return Void(id=cid, table=table, ts=ts, sig=sig, coup=coup, reason=reason)
    if cmd in ("enter_card", "accept"):
        return _entry(data, cid, cmd, coup, card, table, ts, sig, journalled=journalled and not as_sent)
    if cmd == "new_shoe":
        return NewShoe(id=cid, table=table, ts=ts, sig=sig)
    return EndShoe(id=cid, table=table, ts=ts, sig=sig)


def _correct(
    data: Mapping[str, Any],
    cid: CommandId,
    coup: int,
    reason: str,
    table: str | UnsetType,
    ts: float | UnsetType,
    sig: str | UnsetType,
    *,
    journalled: bool,
) -> Correct:
    """``correct``'s own fields: ``cards`` an object of 1 to 6 positions
    (each once: a duplicate key is refused by the parser), each a card code;
    ``reason`` required; ``confirm`` a boolean if present."""
    raw = data["cards"]
    if not isinstance(raw, Mapping) or not 1 <= len(raw) <= len(HAND_POSITIONS):
        raise CommandError(
            f"correct: 'cards' must be an object of 1 to {len(HAND_POSITIONS)} positions"
            f" ({' '.join(HAND_POSITIONS)}) to card codes",
            cid,
        )
    cards: dict[Any, str] = {}
    for pos, value in raw.items():
        if pos not in HAND_POSITIONS:
            raise CommandError(f"correct: position {pos!r} is none of {' '.join(HAND_POSITIONS)}", cid)
        if not isinstance(value, str):
            raise CommandError(f"correct: {pos} must be a card code such as 'TD'", cid)
        _one_line(value, pos, cid, "correct", journalled=journalled)
        try:
            cards[pos] = parse_card(value)
        except CardError as exc:
            raise CommandError(f"correct: {pos}: {exc}", cid) from None
    if not reason.strip():
        raise CommandError("correct: 'reason' is required (why the result is corrected)", cid)
    confirm: bool | UnsetType = UNSET
    if "confirm" in data:
        confirm = data["confirm"]
        if not isinstance(confirm, bool):
            raise CommandError("correct: 'confirm' must be true or false", cid)
    # in the positions' order, whatever order they were sent in
    ordered: dict[Any, str] = {p: cards[p] for p in HAND_POSITIONS if p in cards}
    return Correct(
        id=cid, table=table, ts=ts, sig=sig, coup=coup, cards=ordered, reason=reason, confirm=confirm
    )


def _entry(
    data: Mapping[str, Any],
    cid: CommandId,
    cmd: str,
    coup: int,
    card: str,
    table: str | UnsetType,
    ts: float | UnsetType,
    sig: str | UnsetType,
    *,
    journalled: bool,
) -> EnterCard | Accept:
    """``enter_card`` or ``accept``, with ``confirm`` (a boolean) if sent; one
    journalled without it (before it existed) is re-fed as taken then."""
    confirm: bool | UnsetType = UNSET
    if "confirm" in data:
        confirm = data["confirm"]
        if confirm is None and journalled:
            confirm = UNSET  # (journalled as not sent: ``command_json``)
        elif not isinstance(confirm, bool):
            raise CommandError(f"{cmd}: 'confirm' must be true or false", cid)
    elif journalled:
        if cmd == "enter_card":
            return EnterCardAsTaken(id=cid, table=table, ts=ts, sig=sig, coup=coup, card=card)
        return AcceptAsTaken(id=cid, table=table, ts=ts, sig=sig, coup=coup)
    if cmd == "enter_card":
        return EnterCard(id=cid, table=table, ts=ts, sig=sig, coup=coup, card=card, confirm=confirm)
    return Accept(id=cid, table=table, ts=ts, sig=sig, coup=coup, confirm=confirm)


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
