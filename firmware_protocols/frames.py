"""The decoded frames every protocol produces, whatever its wire format.

These are the only types the engine sees from a device. A frame carries the
device read time ``t`` (Unix seconds, from the driver) and the device's own
sequence number ``seq`` (``None`` where the protocol has none).

Cards are two-character codes, rank ``A23456789TJQK`` then suit ``SHDC``
(``"TD"`` = ten of diamonds); ``None`` is a card that passed the reader
unread.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hello:
    """The device (re)started; its sequence numbering restarts here."""

    t: float
    seq: int | None
    model: str
    firmware: str
    serial: str


@dataclass(frozen=True, slots=True)
class Card:
    """A card left the shoe.

    ``hand`` is the device's own placement, for shoes that assign cards to
    hands themselves (Angel Eye): ``P1``..``P3``, ``B1``..``B3``, ``burn``,
    ``first`` (the exposed burn-indicator card) or ``burn_count``; ``None``
    for shoes that only read cards. ``game`` is False for a card the device
    reports as drawn outside the game (while locked, in error or in settings).
    """

    t: float
    seq: int | None
    card: str | None
    face_up: bool = False
    deck: int | None = None
    hand: str | None = None
    game: bool = True


@dataclass(frozen=True, slots=True)
class Button:
    """A dealer button: ``NEWSHOE``, ``RESULT``; Angel Eye adds ``STANDBY``
    (between coups) and ``REDEAL`` (the shoe announces a re-deal)."""

    t: float
    seq: int | None
    name: str


@dataclass(frozen=True, slots=True)
class CutCard:
    """The cut card passed the reader."""

    t: float
    seq: int | None


#: The text of an ``ERROR`` status that says a card was dealt but not read
#: (Angel Eye's error reason 1; such a shoe sends no card message for it).
UNREAD_CARD_ERROR = "unreadable card"


@dataclass(frozen=True, slots=True)
class Status:
    """Device status: ``OK``, ``JAM``, ``EMPTY``, ``LID_OPEN``,
    ``READER_FAULT``, ``LOW_POWER``; Angel Eye adds ``ERROR`` (``text`` says
    which), ``LOCKED``, ``UNLOCKED`` and ``PRESET``."""

    t: float
    seq: int | None
    code: str
    text: str = ""

    @property
    def card_unread(self) -> bool:
        """The device dealt a card it could not read and says so only as
        this error (:data:`UNREAD_CARD_ERROR`, in error mode or not): the
        card still took its place in the deal."""
        return self.code == "ERROR" and self.text.startswith(UNREAD_CARD_ERROR)


@dataclass(frozen=True, slots=True)
class ShuffleCommit:
    """The shuffler's commitment: SHA-256 (hex, lower case) of the shuffled
    order as the ASCII card codes joined by ``,``."""

    t: float
    seq: int | None
    shoe_id: str
    ncards: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ShuffleOrder:
    """Cards ``index..index+len(cards)-1`` of the shuffled order (secret)."""

    t: float
    seq: int | None
    index: int
    cards: tuple[str | None, ...]

    def __repr__(self) -> str:  # never leak the order into logs by accident
        hidden = f"<{len(self.cards)} hidden>"
        return f"ShuffleOrder(t={self.t!r}, seq={self.seq!r}, index={self.index}, cards={hidden})"


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """The device announces the coup's result itself (Angel Eye ``G``).
    ``winner``: ``player``, ``banker``, ``tie`` or ``quit`` (forced quit)."""

    t: float
    seq: int | None
    winner: str
    player_pair: bool
    banker_pair: bool


@dataclass(frozen=True, slots=True)
class HostRequest:
    """Host to device: ``REQ`` (shoe-ascii/1) or an Angel Eye command
    (``what`` = ``LK01``, ``LK02``, ``EC00``, ``GP00``)."""

    t: float
    seq: int | None
    what: str


@dataclass(frozen=True, slots=True)
class Ack:
    """Device's answer to a host command (Angel Eye ``ACK``/``NAK``+code)."""

    t: float
    seq: int | None
    ok: bool
    code: str = ""


@dataclass(frozen=True, slots=True)
class SequenceGap:
    """Synthesised by a decoder: frames were lost on the line.

    ``seq`` is the sequence number received, ``expected`` the one that should
    have come, ``missing`` how many frames were skipped.

    ``exact`` is False where ``missing`` is only the proven least: more
    frames (a whole cycle of a short sequence, or more) may have been lost
    too, and how many is unknown (``angel-eye/2``, whose sequence is a short
    cycle of characters). The engine then treats the loss as of unknown
    size, never as ``missing`` frames. The 16-bit sequences always count
    exactly.
    """

    t: float
    seq: int | None
    expected: int
    missing: int
    exact: bool = True


@dataclass(frozen=True, slots=True)
class Link:
    """Synthesised by the daemon from the driver: the device connection went
    down (``up=False``) or came back (``up=True``)."""

    t: float
    seq: int | None
    up: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Renumbered:
    """Synthesised by the engine, never on the line: a supervisor's
    ``accept`` of the next coup's number (``coup``), given while the
    shoe ``shoe``'s frames were held. It waits among them where the
    command came, so the number goes to the first coup dealt after the
    command, not to a coup whose frames arrived before it."""

    t: float
    seq: int | None
    coup: int
    shoe: str


@dataclass(frozen=True, slots=True)
class DeviceSeen:
    """Synthesised by the engine, never on the line: a device frame
    (``frame``: a HELLO, a fault status or the OK that clears it) that
    came while frames were held behind an earlier coup. Its
    ``device.status`` was sent when it came; what it does to the game (a
    restart's loss, a fault's DEVICE_FAULT) waits among the frames held,
    where it came, and applies to the coup they show it came in."""

    t: float
    seq: int | None
    frame: Hello | Status


Frame = (
    Hello
    | Card
    | Button
    | CutCard
    | Status
    | ShuffleCommit
    | ShuffleOrder
    | DeviceResult
    | HostRequest
    | Ack
    | SequenceGap
    | Link
    | Renumbered
    | DeviceSeen
)
