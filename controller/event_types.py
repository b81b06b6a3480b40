"""The events of docs/events.md, one definition each: the envelope, and one
``msgspec.Struct`` per event type holding its payload (``TYPE`` is its
``type``). The JSON Schemas shipped in ``controller/schemas/`` are generated
from these (``python -m controller.contract_gen``); mypy checks every field
the engine fills.

At run time an event stays the plain dict consumers read (``ev["type"]``):
``controller.engine`` builds a payload Struct and ``Engine._emit`` turns it
into the dict, envelope first (``v, type, event_id, table, shoe, seq, ts``)
then the payload's fields in the order declared here; a field whose value
is ``UNSET`` is left out (the optional ``detail``, ``entered``...). The two
types of nearly every event, ``card`` and ``coup.result``, have that dict
built at once (``Engine._emit_card``, ``boundary.settle_now``): the same
dict, which ``tests/test_engine_fast_path.py`` checks against these. Nested
objects are ``TypedDict``s: they are dicts already, so nothing converts them.
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, ClassVar, Literal, TypedDict, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "EVENT_TYPES",
    "PAYLOAD_READERS",
    "UNSET",
    "CardEvent",
    "CoupCorrected",
    "CoupResult",
    "CoupVoid",
    "DeviceStatus",
    "EnvelopeRead",
    "Misdeal",
    "MisdealAction",
    "OddsUpdate",
    "Payload",
    "ReplayMark",
    "RoadsEvent",
    "RulesInForce",
    "SecurityAlert",
    "ShoeBurn",
    "ShoeCutCard",
    "ShoeEnded",
    "ShoeStarted",
    "UnsetType",
]

# ------------------------------------------------------------------ shapes

TS_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
TABLE_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"

Ts = Annotated[str, Meta(pattern=TS_PATTERN)]
CardCode = Annotated[str, Meta(pattern=r"^[A23456789TJQK][SHDC]$")]
CoupNo = Annotated[int, Meta(ge=1)]
Count = Annotated[int, Meta(ge=0)]
Position = Literal["P1", "B1", "P2", "B2", "P3", "B3", "burn", "extra"]
DealtPosition = Literal["P1", "B1", "P2", "B2", "P3", "B3", "extra"]
Winner = Literal["player", "banker", "tie"]
Tag = Literal["banker2", "banker7", "dragon7", "panda8"]


class ReplayMark(TypedDict):
    """A replayed event's mark (envelope 1.1): the replay run that
    published it and the capture it came from."""

    run: Annotated[str, Meta(pattern=r"^[0-9a-f]{32}$", description="the replay run (32 hex digits)")]
    source: Annotated[str, Meta(min_length=1, max_length=255, description="the capture's file name")]


#: A live table's event id ``<table>/<shoe or ->/<seq>`` (two slashes), or a
#: replay's ``replay/<run>/<table>/<shoe or ->/<seq>`` (four): never equal
#: (see ``controller.replay.replay_event_id``).
EVENT_ID_PATTERN = (
    r"^(?:[A-Za-z0-9_-]{1,32}/[^/]+/[0-9]+|replay/[0-9a-f]{32}/[A-Za-z0-9_-]{1,32}/[^/]+/[0-9]+)$"
)


#: A chain link: the hex SHA-256 of an event's signed bytes.
DIGEST_PATTERN = r"^[0-9a-f]{64}$"
_KEY_ID = "the signing key's id: the first 16 hex digits of SHA-256 of its raw public key"
_PREV = "SHA-256 (hex) of the signed bytes of the table's previous event; null on a chain's first"
_RESET = "only on a new epoch's first event after a lost journal: why the chain starts again"
_HEAD = "on shoe.ended: the table's chain head when the shoe ended (equal to its prev)"
_SIG = "Ed25519 over the event's signed bytes (the line without its last member, sig), base64url"


class Envelope(Struct, kw_only=True, forbid_unknown_fields=True):
    """The fields every event opens with, in this order (docs/events.md);
    ``type`` is the payload's ``TYPE``. Defined here for the schema: the
    engine writes them itself in ``_emit``. ``replay`` (envelope 1.1, issue
    29) is only on an event ``replay --out mqtt`` published, after ``ts``;
    its ``event_id`` then has the replay form."""

    v: Literal[1]
    type: str
    event_id: Annotated[str, Meta(pattern=EVENT_ID_PATTERN)]
    table: Annotated[str, Meta(pattern=TABLE_PATTERN)]
    shoe: Annotated[str, Meta(pattern=r"^[^/]+$")] | None
    seq: Annotated[int, Meta(ge=1)]
    ts: Ts
    replay: ReplayMark | UnsetType = UNSET
    # Signed and chained events (envelope 1.1): written by the
    # journal after the payload, ``sig`` always last (controller.signing).
    key_id: Annotated[str, Meta(pattern=r"^[0-9a-f]{16}$", description=_KEY_ID)] | UnsetType = UNSET
    prev: Annotated[str, Meta(pattern=DIGEST_PATTERN, description=_PREV)] | UnsetType | None = UNSET
    chain_reset: Annotated[str, Meta(min_length=1, description=_RESET)] | UnsetType = UNSET
    sig: Annotated[str, Meta(pattern=r"^[A-Za-z0-9_-]{86}$", description=_SIG)] | UnsetType = UNSET


class Payload(Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every event's payload; ``TYPE`` is the event's ``type``."""

    TYPE: ClassVar[str]


# ------------------------------------------------------------ nested objects


class DeviceInfo(TypedDict):
    model: str
    firmware: str
    serial: str


class Hand(TypedDict):
    cards: Annotated[list[CardCode], Meta(min_length=2, max_length=3)]
    total: Annotated[int, Meta(ge=0, le=9)]


class Tally(TypedDict):
    player: Count
    banker: Count
    tie: Count


class DealtCard(TypedDict):
    position: DealtPosition
    card: CardCode | None


class Bet(TypedDict):
    win: float
    push: float
    lose: float
    ev: float


# ------------------------------------------------------------------ events


class DeviceStatus(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "device.status"
    state: Literal["online", "offline", "fault"]
    code: str
    device: DeviceInfo
    detail: str | UnsetType = UNSET


class RulesInForce(TypedDict):
    """The settings a shoe is dealt under, in a ``shoe.started`` that
    follows a change of them (``controller/engine/settings.py``)."""

    profile: str
    decks: Annotated[int, Meta(ge=1, le=12)]
    odds: bool
    advantage_threshold: float
    burn: Annotated[str, Meta(pattern=r"^(first_card|decks|fixed:[1-8])$")]
    cut_card_min: Count
    after_cut: Literal["one_more", "last"]
    coup_boundary: Literal["button", "auto"]
    demo_coups: Annotated[int, Meta(ge=0, le=3)]
    correction_deadline_s: Annotated[float, Meta(gt=0)]
    extra_card: Literal["burn", "next_coup", "void"]
    digest: Annotated[
        str,
        Meta(
            pattern=r"^[0-9a-f]{64}$",
            description="sha256 of the settings, the profile's every table and payout included",
        ),
    ]
    changed: Annotated[
        list[str],
        Meta(
            min_length=1,
            description="the keys above that differ from the shoe announced before (profile alone: its "
            "tables or payouts)",
        ),
    ]


class ShoeStarted(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "shoe.started"
    decks: Annotated[int, Meta(ge=1, le=12)]
    profile: str
    shuffle_commit: Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")] | None
    rules: (
        Annotated[
            RulesInForce,
            Meta(
                description="present when this shoe is dealt under other settings than the shoe "
                "announced before it (a config change, applied from the next shoe): the settings in force"
            ),
        ]
        | UnsetType
    ) = UNSET


class ShoeBurn(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "shoe.burn"
    first_card: CardCode | None
    burned: Count


class ShoeCutCard(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "shoe.cut_card"
    coup: CoupNo
    last_coup: CoupNo


class ShoeEnded(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "shoe.ended"
    coups: Count
    coups_exact: (
        Annotated[
            bool,
            Meta(
                description="false when frames lost on the line may have held whole coups and no "
                "supervisor gave the numbering back: 'coups' then counts the coups seen"
            ),
        ]
        | UnsetType
    ) = UNSET
    cards_dealt: Count
    tally: Tally
    reason: str | UnsetType = UNSET
    stats: dict[str, Any] | UnsetType = UNSET
    #: written by the journal when it signs, after the envelope's ``prev``
    chain_head: (
        Annotated[str, Meta(pattern=DIGEST_PATTERN, description="the table's chain head: equal to prev")]
        | UnsetType
        | None
    ) = UNSET


class CardEvent(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "card"
    coup: CoupNo | None
    position: Position
    card: CardCode | None
    value: Annotated[int, Meta(ge=0, le=9)] | None
    face_up: bool
    entered: bool | UnsetType = UNSET


class CoupResult(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "coup.result"
    coup: CoupNo
    demo: bool
    player: Hand
    banker: Hand
    winner: Winner
    natural: bool
    player_pair: bool
    banker_pair: bool
    tags: Annotated[list[Tag], Meta(extra_json_schema={"uniqueItems": True})]
    settlement: dict[Annotated[str, Meta(pattern=r"^[a-z0-9_]{1,32}$")], Annotated[float, Meta(ge=-1)]] | None
    corrections: list[str]


HandPosition = Literal["P1", "B1", "P2", "B2", "P3", "B3"]
EventId = Annotated[str, Meta(pattern=EVENT_ID_PATTERN)]


class CardChange(TypedDict):
    """A card a supervisor's correction replaced (``coup.corrected``)."""

    position: HandPosition
    was: CardCode
    card: CardCode


class CoupCorrected(Payload, kw_only=True, forbid_unknown_fields=True):
    """A settled coup's result corrected by a supervisor (``correct``): the
    hands, winner, flags and settlement as ``coup.result`` carries them,
    recomputed from the corrected cards; it supersedes the result (or the
    earlier correction) whose ``event_id`` it names."""

    TYPE: ClassVar[str] = "coup.corrected"
    coup: CoupNo
    player: Hand
    banker: Hand
    winner: Winner
    natural: bool
    player_pair: bool
    banker_pair: bool
    tags: Annotated[list[Tag], Meta(extra_json_schema={"uniqueItems": True})]
    settlement: dict[Annotated[str, Meta(pattern=r"^[a-z0-9_]{1,32}$")], Annotated[float, Meta(ge=-1)]]
    supersedes: Annotated[
        EventId,
        Meta(description="the event_id of the coup.result, or the coup.corrected, this one replaces"),
    ]
    changes: Annotated[list[CardChange], Meta(min_length=1, max_length=6)]
    reason: Annotated[str, Meta(min_length=1, max_length=500)]
    command_id: Annotated[str, Meta(min_length=1, max_length=128)] | int


class CoupVoid(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "coup.void"
    coup: CoupNo
    code: str
    article: Literal["X"]
    detail: str | UnsetType = UNSET
    cards: list[DealtCard]


MisdealAction = Literal["corrected", "awaiting_supervisor", "void"]


class Misdeal(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "misdeal"
    coup: CoupNo
    code: str
    detail: str
    action: MisdealAction
    deadline: Ts | None


class SecurityAlert(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "security.alert"
    code: str
    detail: str
    coup: CoupNo | None


class OddsUpdate(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "odds.update"
    coup: CoupNo
    cards_left: Count
    view: Literal["shoe", "counter"]
    bets: dict[str, Bet]


class BeadCell(TypedDict):
    """A coup on the bead plate (``controller.roads``)."""

    w: Literal["B", "P", "T"]
    pp: bool
    bp: bool


class BigRoadCell(TypedDict):
    """A Banker or Player win on the big road, with the ties counted on it."""

    w: Literal["B", "P"]
    ties: Count
    pp: bool
    bp: bool


Colour = Literal["red", "blue"]


class RoadsEvent(Payload, kw_only=True, forbid_unknown_fields=True):
    TYPE: ClassVar[str] = "roads"
    bead_plate: list[list[BeadCell]]
    big_road: list[list[BigRoadCell]]
    big_eye_boy: list[list[Colour]]
    small_road: list[list[Colour]]
    cockroach_pig: list[list[Colour]]


#: Every event type, by its ``type``.
EVENT_TYPES: dict[str, type[Payload]] = {
    p.TYPE: p
    for p in (
        DeviceStatus,
        ShoeStarted,
        ShoeBurn,
        ShoeCutCard,
        ShoeEnded,
        CardEvent,
        CoupResult,
        CoupCorrected,
        CoupVoid,
        Misdeal,
        SecurityAlert,
        OddsUpdate,
        RoadsEvent,
    )
}


# ----------------------------------------------------------------- reading
#
# A consumer (the archive, the board) decodes an event with the same
# definitions, strictly (no coercion: ``"1"`` is no integer, ``0`` no
# boolean), with one difference: fields it does not know are ignored, so an
# older consumer keeps reading a newer table's events (docs/events.md: an
# optional addition keeps ``v`` 1). An event of a type it does not know is
# read for its envelope alone.


class EnvelopeRead(Envelope, kw_only=True, forbid_unknown_fields=False):
    """The envelope of any event as read: the payload's fields, and any
    field a newer version adds, ignored."""


def _reader(payload: type[Payload]) -> type[Payload]:
    """``payload``'s Struct as read: a subclass of it, tagged by ``type``
    (``isinstance`` and ``match`` see the payload type), unknown fields ignored."""
    config = {"tag_field": "type", "tag": payload.TYPE, "kw_only": True, "forbid_unknown_fields": False}
    return types.new_class(payload.__name__, (payload,), config)


#: Each known type's payload as read (``read_payload``), by ``type``.
PAYLOAD_READERS: dict[str, type[Payload]] = {t: _reader(p) for t, p in EVENT_TYPES.items()}

_ENVELOPE = msgspec.json.Decoder(EnvelopeRead)
_PAYLOAD: msgspec.json.Decoder[Any] = msgspec.json.Decoder(Union[tuple(PAYLOAD_READERS.values())])  # noqa: UP007


def read_envelope(data: bytes) -> EnvelopeRead:
    """An event's envelope; raises ``msgspec.ValidationError`` (a field of
    the envelope missing or not as defined) or ``msgspec.DecodeError``."""
    return _ENVELOPE.decode(data)


def read_payload(data: bytes) -> Payload:
    """The payload of an event of a known type (a tagged union on ``type``);
    raises ``msgspec.ValidationError`` or ``msgspec.DecodeError``."""
    payload: Payload = _PAYLOAD.decode(data)
    return payload


_AT = re.compile(
    r"(?P<what>.*?)(?: - at `(?P<key>key)` in `(?P<within>[^`]*)`| - at `(?P<path>[^`]*)`)?", re.S
)
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]*)`")


def problem(exc: msgspec.MsgspecError, data: Any = None) -> str:
    """msgspec's error as ``<field>: <what is wrong>, not <value>``
    (``player.total: expected `int` <= 9, not 10``), the field first as in
    every other reason; the value when ``data`` (the event as a plain JSON
    value) holds it."""
    m = _AT.fullmatch(str(exc))
    assert m is not None  # (every text matches: the path is optional)
    what, path = m["what"], m["path"] or m["within"] or "$"
    path = path[2:] if path.startswith("$.") else path[1:]
    missing = _MISSING.fullmatch(what)
    if missing:
        return f"{path + '.' if path else ''}{missing['name']}: required, missing"
    if what[1:2].islower():  # ("Expected", not "JSON")
        what = what[:1].lower() + what[1:]
    if m["key"]:
        return f"{path}: a key: {what}"
    found, value = _at(data, path)
    shown = f", not {value!r:.40}" if found and "value" not in what and "got `" not in what else ""
    return f"{path or 'the event'}: {what}{shown}"


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def _at(data: Any, path: str) -> tuple[bool, Any]:
    """The value at msgspec's ``path`` (``changes[0].card``) in ``data``."""
    for name, index in _STEP.findall(path):
        if index and isinstance(data, list) and int(index) < len(data):
            data = data[int(index)]
        elif name and isinstance(data, dict) and name in data:
            data = data[name]
        else:
            return False, None
    return True, data
