"""The fake shoe: a deterministic simulated card-reading shoe.

Owns the simulated device end to end: it shuffles a shoe (``random.Random``
seeded, so the same seed and options give the same bytes), optionally
announces a shuffler commitment, burns, places the cut card, deals coup
after coup by the third-card tableau, presses RESULT, ends the shoe after
the cut card (``after_cut: one_more``) and starts the next one. It speaks
any wire protocol through the codecs' encoders and can inject the faults
of docs/devices.md, The fake shoe.

The dealer here is written independently of ``controller.engine`` and
``controller.rules`` on purpose: it is the reference the end-to-end tests
compare the engine against, so it must not share the engine's code (nor
its bugs). It keeps its own record of what it dealt (:attr:`FakeShoe.coups`,
:attr:`FakeShoe.shoes`, and JSON lines to ``log``), unless told not to
(``record=False``: a fake that deals for as long as it runs, whose record
nobody reads, e.g. the daemon's embedded default device).

Three ways to run it:

- :meth:`FakeShoe.stream` / :meth:`FakeShoe.events`: in-process generators
  of chunks with synthetic timestamps (tests, benchmarks);
- :class:`FakeDriver`: a :class:`drivers.base.Driver` in process, paced in
  real time (the daemon's embedded default device);
- :func:`serve_pty`: the bytes on a pseudo-terminal, for the real serial
  driver to read (``shoe-controller fake --pty``).

What it sends: ``HELLO`` once (seq 0), then per shoe ``BTN NEWSHOE``, the
shuffler's ``SHUF`` + ``ORD`` frames if enabled, the exposed first card and
the burned cards (as many as its value, 10/J/Q/K counting 10), then coups:
``P1 B1 P2 B2 [P3] [B3]`` and ``BTN RESULT``. ``CUT`` comes just before the
card at the cut position; the coup that card belongs to is finished and one
more is dealt, then the next shoe starts. On ``angel-eye/2`` the device is
an Angel Eye: ``S`` once instead of HELLO, no NEWSHOE/SHUF, every card a
``D`` placed on its hand (``first``, ``burn``, ``P1``..``B3``), ``G`` with
the winner and pairs instead of RESULT, every message sent three times with
bit 7 set on its data bytes, and its seq the next character of
``angel_seq_cycle`` (default ``0123456789ABCDEF``, starting over at ``S``),
as real shoes send them (docs/devices.md, Angel Eye).

Faults (probability per frame, per card or per coup; injected only while a
coup is being dealt, so each is recorded in that coup's ``faults``):

- ``garbage`` (per frame): 1-16 random bytes before the frame, never a
  frame-start byte, so no good frame is lost;
- ``badck`` (per frame): the frame's checksum is wrong, so it is lost and
  the next good frame shows a sequence gap;
- ``gap`` (per frame): the frame is not sent, its sequence number skipped;
- ``unread`` (per card): ``CARD XX`` (Angel Eye: error ``unreadable card``
  then its clearing, no ``D``);
- ``faceup`` (per card; not on Angel Eye, which cannot say it): flag ``F``;
- ``wronghand`` (per card; Angel Eye only): the card is placed on the
  other hand (``P2`` reported as ``B2``);
- ``extra`` (per coup): one more card from the shoe once the tableau is
  complete, before RESULT (Angel Eye: on the next free slot, P3, B3 or burn);
- ``premature`` (per coup that draws): RESULT before the first due third
  card; the due card(s) follow, then RESULT again;
- ``jam`` (per coup): ``STAT JAM`` then ``STAT OK`` after the 1st-3rd card
  (Angel Eye: error ``card pulled back midway`` and its clearing);
- ``disconnect`` (per coup): the line drops after the 1st-3rd card for two
  synthetic seconds; 0-2 of the frames that follow are lost;
- ``foreign`` (per coup): one of the first four cards is not from the shoe:
  a copy of a card whose every copy is already out if there is one, else a
  card from deck ``decks + 1`` where the protocol carries the deck, else an
  extra copy (``how`` in the record says which).

A shoe that runs out mid-coup (only possible with many extra cards) sends
``STAT EMPTY`` (Angel Eye: error ``draw timeout``) and ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import itertools
import json
import os
import random
import select
import struct
import tempfile
import termios
import threading
import time
import tty
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, Any, Protocol

from drivers.base import Chunk, LinkEvent
from drivers.fake_settings import FAULT_KINDS, MAX_CARDS_PER_SECOND, check_cards_per_second, parse_faults
from firmware_protocols.frames import (
    UNREAD_CARD_ERROR,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)

ASCII = "shoe-ascii/1"
BIN = "shoe-bin/1"
ANGEL = "angel-eye/2"
PROTOCOLS: tuple[str, ...] = (ASCII, BIN, ANGEL)

# How each probability is applied: per frame sent during a coup, per card of
# a coup, or once per coup.
PER_FRAME_FAULTS = frozenset({"garbage", "badck", "gap"})
PER_CARD_FAULTS = frozenset({"unread", "faceup", "wronghand"})
PER_COUP_FAULTS = frozenset({"extra", "premature", "jam", "disconnect", "foreign"})

DEFAULT_T0 = 1_763_800_000.0
"""Synthetic start time of a stream (Unix seconds), fixed for determinism."""

# The dealer's own card tables (deliberately not imported from controller).
_RANKS = "A23456789TJQK"
_SUITS = "SHDC"
_CARDS: tuple[str, ...] = tuple(r + s for s in _SUITS for r in _RANKS)
_POINTS = {r: (i + 1) % 10 if i < 9 else 0 for i, r in enumerate(_RANKS)}
_BURN = {r: i + 1 if i < 9 else 10 for i, r in enumerate(_RANKS)}

# Bytes never used as garbage, per protocol: frame starts, so that line noise
# can cost the frames it replaces but never swallow the following good one.
_SYNC_BYTES = {ASCII: b"$\r\n", BIN: b"\xa5\x5a", ANGEL: b"\x02\x03\x05\x06\x15"}
_SEQ_MODULUS = {ASCII: 65536, BIN: 65536}
#: The Angel Eye seq cycle the fake sends by default: the C# integration's
#: tests use '0'-'9', '0'-'F' and '1'-'F'; the longest of the three (the
#: fewest wraps) is the default. Any cycle of rising printable characters
#: can be chosen (``angel_seq_cycle``).
ANGEL_SEQ_CYCLE = "0123456789ABCDEF"
_CODEC_MODULES = {
    ASCII: "firmware_protocols.shoe_ascii",
    BIN: "firmware_protocols.shoe_bin",
    ANGEL: "firmware_protocols.angel_eye",
}


class _Encoder(Protocol):
    def encode(self, frame: Frame) -> bytes: ...


def banker_draws(banker_total: int, player_third: int | None) -> bool:
    """The tableau's Banker rule (docs/dealing-errors.md, The tableau); ``player_third`` is the point
    value of the Player's third card, ``None`` when the Player stood."""
    if player_third is None:
        return banker_total <= 5
    if banker_total <= 2:
        return True
    if banker_total == 3:
        return player_third != 8
    if banker_total == 4:
        return 2 <= player_third <= 7
    if banker_total == 5:
        return 4 <= player_third <= 7
    if banker_total == 6:
        return player_third in (6, 7)
    return False


def _total(cards: list[str]) -> int:
    return sum(_POINTS[c[0]] for c in cards) % 10


def _winner(player: list[str], banker: list[str]) -> str:
    p, b = _total(player), _total(banker)
    return "player" if p > b else "banker" if b > p else "tie"


@dataclass(frozen=True, slots=True)
class Disconnect:
    """In :meth:`FakeShoe.events`: the device drops off the line at ``t``
    for ``downtime`` synthetic seconds; ``lost`` frames sent meanwhile are
    lost (their sequence numbers are skipped)."""

    t: float
    downtime: float
    lost: int


@dataclass(slots=True)
class _Shoe:
    number: int
    order: list[str]
    cut_index: int
    next: int = 0
    cut_out: bool = False
    last_coup: int | None = None
    dealt: dict[str, int] = field(default_factory=dict)

    @property
    def exhausted(self) -> bool:
        return self.next >= len(self.order)


class FakeShoe:
    """A simulated shoe. ``shoes=0`` deals forever; ``cards_per_second``
    only sets the synthetic timestamps (``0``: a fixed 1 ms per card).
    ``record=False`` keeps no record in memory (:attr:`coups` and
    :attr:`shoes` stay empty; ``log`` still gets it): dealing forever, the
    record grows by about 0.55 kB a coup. The bytes sent are the same.

    Each call of :meth:`events` / :meth:`stream` starts over from the seed
    and refills :attr:`coups` and :attr:`shoes`.
    """

    def __init__(
        self,
        seed: int = 1,
        protocol: str = ASCII,
        decks: int = 8,
        faults: str | Mapping[str, float] | None = None,
        *,
        shoes: int = 0,
        cut_card_min: int = 14,
        shuffler: bool = False,
        cards_per_second: float = 0.0,
        t0: float = DEFAULT_T0,
        log: str | os.PathLike[str] | IO[str] | None = None,
        model: str = "FAKE-SHOE",
        firmware: str = "1.0",
        serial: str | None = None,
        angel_seq_cycle: str = ANGEL_SEQ_CYCLE,
        record: bool = True,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
        if not 1 <= decks <= 12:
            raise ValueError(f"decks {decks} is outside 1..12")
        if cut_card_min < 12:
            raise ValueError(f"cut_card_min {cut_card_min} is below 12")
        if cut_card_min + 2 > decks * 52 - 20:
            raise ValueError(f"cut_card_min {cut_card_min} leaves no room to deal in {decks} deck(s)")
        if shoes < 0:
            raise ValueError("shoes must be >= 0 (0 = forever)")
        check_cards_per_second(cards_per_second)
        cycle = angel_seq_cycle
        if not (
            2 <= len(cycle) <= 94
            and all("!" <= c <= "~" for c in cycle)
            and all(a < b for a, b in itertools.pairwise(cycle))
        ):
            raise ValueError(
                f"angel_seq_cycle {cycle!r} is not 2-94 printable ASCII characters, rising, each once"
            )
        #: the seq on the wire for each sequence number (Angel Eye: a character)
        self._wire_seq: tuple[int, ...] | None = tuple(cycle.encode("ascii")) if protocol == ANGEL else None
        self._seq_modulus = len(cycle) if protocol == ANGEL else _SEQ_MODULUS[protocol]
        self.seed = seed
        self.protocol = protocol
        self.decks = decks
        self.faults = parse_faults(faults)
        self.shoes_to_deal = shoes
        self.cut_card_min = cut_card_min
        self.shuffler = shuffler and protocol != ANGEL
        self.cards_per_second = cards_per_second
        self.t0 = t0
        self.model = model
        self.firmware = firmware
        self.serial = serial if serial is not None else f"{seed:06d}"
        # Synthetic time is kept in whole microseconds so timestamps stay
        # exact decimals: per card, per any other frame, per disconnect.
        self._card_us = round(1e6 / cards_per_second) if cards_per_second > 0 else 1000
        # An Angel Eye sends every message three times on a slow line (4800
        # baud: 37.5 ms for the shortest), so its messages are paced like
        # cards; the others send other frames ten times as fast.
        self._frame_us = self._card_us if protocol == ANGEL else max(1, self._card_us // 10)
        self._disconnect_us = 2_000_000
        #: Synthetic seconds per card, per other frame, per disconnect.
        self.card_interval = self._card_us / 1e6
        self.frame_interval = self._frame_us / 1e6
        self.disconnect_downtime = self._disconnect_us / 1e6
        #: The record: one dict per coup dealt (see :meth:`_new_coup`).
        self.coups: list[dict[str, Any]] = []
        #: One dict per shoe dealt (burn, cut card, commitment).
        self.shoes: list[dict[str, Any]] = []
        self.record = record
        self._log_target = log
        self._log: IO[str] | None = None
        self._reset()

    # -- public generators ---------------------------------------------------

    def stream(self) -> Iterator[Chunk]:
        """Chunks ``(t, bytes)`` with synthetic timestamps; a ``disconnect``
        fault shows only as the frames it lost."""
        for item in self.events():
            if not isinstance(item, Disconnect):
                yield item

    def events(self) -> Iterator[Chunk | Disconnect]:
        """Chunks and :class:`Disconnect` markers, in order."""
        self._reset()
        self._open_log()
        try:
            yield from self._send(Hello(0.0, None, self.model, self.firmware, self.serial), reset_seq=True)
            number = 0
            while self.shoes_to_deal == 0 or number < self.shoes_to_deal:
                number += 1
                yield from self._deal_shoe(number)
        finally:
            self._close_log()

    # -- state ---------------------------------------------------------------

    def _reset(self) -> None:
        # Only the protocol in use is imported.
        module = importlib.import_module(_CODEC_MODULES[self.protocol])
        self._encoder: _Encoder = module.Encoder()
        self._shoe_rng = random.Random(self.seed)
        # A separate stream for faults, so the same seed deals the same first
        # shoe with or without faults.
        self._fault_rng = random.Random(f"faults:{self.seed}")
        self._us = 0  # synthetic microseconds since t0
        self._seq = 0
        self._coup: dict[str, Any] | None = None
        self._lose_frames = 0
        self._frame_no = 0  # frames sent or lost since the start (the record's "n")
        self.coups = []
        self.shoes = []

    def _open_log(self) -> None:
        target = self._log_target
        if target is None:
            self._log = None
        elif isinstance(target, (str, os.PathLike)):
            self._log = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed in _close_log
        else:
            self._log = target

    def _close_log(self) -> None:
        if self._log is not None and self._log is not self._log_target:
            self._log.close()
        self._log = None

    def _keep(self, kind: str, record: dict[str, Any]) -> None:
        """The record of a ``shoe`` or ``coup`` dealt: in memory (unless
        ``record=False``) and as a JSON line to ``log``."""
        if self.record:
            (self.shoes if kind == "shoe" else self.coups).append(record)
        if self._log is not None:
            self._log.write(json.dumps({"record": kind, **record}, sort_keys=False) + "\n")
            self._log.flush()

    def _roll(self, kind: str) -> bool:
        p = self.faults.get(kind, 0.0)
        return p > 0.0 and self._fault_rng.random() < p

    def _fault(self, kind: str, **detail: Any) -> None:
        assert self._coup is not None
        self._coup["faults"].append({"kind": kind, **detail})

    # -- frames --------------------------------------------------------------

    def _send(
        self, frame: Frame, *, reset_seq: bool = False, card: bool = False
    ) -> Generator[Chunk, None, None]:
        """Encode and emit one frame, stamping its time and sequence number
        and applying the per-frame faults while a coup is being dealt."""
        if reset_seq:
            self._seq = 0
        seq = self._seq if self._wire_seq is None else self._wire_seq[self._seq]
        self._seq = (self._seq + 1) % self._seq_modulus
        n = self._frame_no
        self._frame_no += 1
        step = self._card_us if card else self._frame_us
        in_coup = self._coup is not None
        if in_coup and self._lose_frames == 0 and self._roll("garbage"):
            noise = self._garbage()
            self._fault("garbage", bytes=len(noise))
            yield (self._now(), noise)
            self._us += self._frame_us
        frame = _restamp(frame, self._now(), seq)
        name = _describe(frame)
        if self._lose_frames > 0:  # sent while the line was down
            self._lose_frames -= 1
            self._fault("disconnect_lost", seq=seq, n=n, frame=name)
        elif in_coup and self._roll("gap"):
            self._fault("gap", seq=seq, n=n, frame=name)
        else:
            corrupt = in_coup and self._roll("badck")
            if corrupt:
                self._fault("badck", seq=seq, n=n, frame=name)
            yield (self._now(), self._encode(frame, corrupt=corrupt))
        self._us += step

    def _now(self) -> float:
        return round(self.t0 + self._us / 1e6, 6)

    def _encode(self, frame: Frame, *, corrupt: bool = False) -> bytes:
        one = self._encoder.encode(frame)
        if corrupt:
            one = _corrupt_checksum(self.protocol, one)
        # Angel Eye sends every message three times with the same sequence
        # (angel_eye.Encoder.encode_repeated, done here so badck hits all three).
        return one * 3 if self.protocol == ANGEL else one

    def _garbage(self) -> bytes:
        banned = _SYNC_BYTES[self.protocol]
        n = self._fault_rng.randint(1, 16)
        out = bytearray()
        while len(out) < n:
            b = self._fault_rng.randrange(256)
            if b not in banned:
                out.append(b)
        return bytes(out)

    # -- the shoe ------------------------------------------------------------

    def _deal_shoe(self, number: int) -> Generator[Chunk | Disconnect, None, None]:
        rng = self._shoe_rng
        order = [c for c in _CARDS for _ in range(self.decks)]
        rng.shuffle(order)
        cards_after_cut = self.cut_card_min + rng.randint(0, 2)
        shoe = _Shoe(number, order, cut_index=len(order) - cards_after_cut)
        commit: str | None = None
        if self.protocol != ANGEL:
            yield from self._send(Button(0.0, None, "NEWSHOE"))
        if self.shuffler:
            commit = hashlib.sha256(",".join(order).encode("ascii")).hexdigest()
            shoe_id = f"{self.seed}-{number}"
            yield from self._send(ShuffleCommit(0.0, None, shoe_id, len(order), commit))
            for i in range(0, len(order), 16):
                yield from self._send(ShuffleOrder(0.0, None, i, tuple(order[i : i + 16])))

        first = yield from self._draw(shoe, "first", coup_number=1)
        burned: list[str] = []
        if first is not None:
            for _ in range(_BURN[first[0]]):
                card = yield from self._draw(shoe, "burn", coup_number=1)
                if card is None:
                    break
                burned.append(card)

        coup_number = 0
        while not shoe.exhausted and (shoe.last_coup is None or coup_number < shoe.last_coup):
            coup_number += 1
            complete = yield from self._deal_coup(shoe, coup_number)
            if not complete:
                break
        record = {
            "shoe": number,
            "decks": self.decks,
            "ncards": len(order),
            "shuffle_commit": commit,
            "first_card": first,
            "burned": burned,
            "cut_index": shoe.cut_index,
            "cards_after_cut": len(order) - shoe.cut_index,
            "last_coup": shoe.last_coup,
            "coups": coup_number,
            "cards_dealt": shoe.next,
        }
        self._keep("shoe", record)

    def _draw(
        self, shoe: _Shoe, hand: str, coup_number: int, report_as: str | None = None
    ) -> Generator[Chunk, None, str | None]:
        """Take the next card from the shoe and send it (a generator whose
        return value is the card, ``None`` once the shoe is empty)."""
        if shoe.next == shoe.cut_index and not shoe.cut_out:
            shoe.cut_out = True
            # The cut card belongs to the coup whose card follows it; with
            # after_cut one_more, one further coup is dealt.
            shoe.last_coup = coup_number + 1
            if self._coup is not None:
                self._coup["cut"] = True
            yield from self._send(CutCard(0.0, None))
        if shoe.exhausted:
            return None
        card = shoe.order[shoe.next]
        shoe.next += 1
        shoe.dealt[card] = shoe.dealt.get(card, 0) + 1
        yield from self._send_card(card, hand, report_as=report_as)
        return card

    def _send_card(
        self,
        card: str,
        hand: str,
        deck: int | None = None,
        *,
        foreign: bool = False,
        report_as: str | None = None,
    ) -> Generator[Chunk, None, None]:
        code: str | None = card
        face_up = False
        # Only Angel Eye places cards on hands itself.
        reported = (report_as or hand) if self.protocol == ANGEL else None
        if self._coup is not None and hand[0] in "PB":
            # A foreign card is always read, or it would not show.
            if not foreign and self._roll("unread"):
                code = None
                self._fault("unread", position=hand, card=card)
                if self.protocol == ANGEL:
                    # No unread-card code on this wire: the shoe reports the
                    # error instead of the card.
                    yield from self._device_error(UNREAD_CARD_ERROR)
                    return
            if self.protocol != ANGEL and self._roll("faceup"):
                face_up = True
                self._fault("faceup", position=hand, card=card)
            if self.protocol == ANGEL and self._roll("wronghand"):
                reported = ("B" if hand[0] == "P" else "P") + hand[1:]
                self._fault("wronghand", position=hand, reported=reported, card=card)
        yield from self._send(Card(0.0, None, code, face_up, deck, reported), card=True)

    def _deal_coup(self, shoe: _Shoe, number: int) -> Generator[Chunk | Disconnect, None, bool]:
        """Deal one coup by the tableau; returns False if the shoe ran out."""
        coup: dict[str, Any] = {
            "shoe": shoe.number,
            "coup": number,
            "player": [],
            "banker": [],
            "winner": None,
            "natural": False,
            "extra": [],
            "cut": False,
            "faults": [],
        }
        self._coup = coup
        dealing = _CoupDeal(self, shoe, number, coup)
        try:
            if not (yield from dealing.deal()):
                return (yield from self._abandon(coup))
        finally:
            self._coup = None
            self._lose_frames = 0
        self._keep("coup", coup)
        return True

    def _abandon(self, coup: dict[str, Any]) -> Generator[Chunk, None, bool]:
        """The shoe ran out mid-coup: the device reports EMPTY."""
        self._fault("exhausted")
        if self.protocol == ANGEL:
            yield from self._send(Status(0.0, None, "ERROR", "draw timeout"))
        else:
            yield from self._send(Status(0.0, None, "EMPTY"))
        self._keep("coup", coup)
        return False

    def _device_error(self, reason: str) -> Generator[Chunk, None, None]:
        """Angel Eye: an ``E`` error message, then ``e`` error cleared."""
        yield from self._send(Status(0.0, None, "ERROR", reason))
        yield from self._send(Status(0.0, None, "OK", f"error cleared: {reason}"))

    def _deal_foreign(self, shoe: _Shoe, hand: str) -> Generator[Chunk, None, str]:
        """A card the shoe does not hold leaves it (not taken from the order).

        Preferably an extra copy of a card whose every copy is already out (so
        the controller can tell at once); else, on protocols that carry the
        deck number, a card from a deck not in the shoe; else just an extra
        copy (only detectable later)."""
        rng = self._fault_rng
        gone = sorted(c for c, n in shoe.dealt.items() if n >= self.decks)
        deck: int | None = None
        if gone:
            card, how = rng.choice(gone), "excess_copy"
        elif self.protocol != ANGEL and self.decks < 12:
            card, how, deck = rng.choice(_CARDS), "foreign_deck", self.decks + 1
        else:
            card, how = rng.choice(_CARDS), "extra_copy"
        if how != "foreign_deck":
            # a copy the controller counts as one of the shoe's own (a card
            # from a foreign deck is none of them: the shoe still holds all
            # its copies of that card)
            shoe.dealt[card] = shoe.dealt.get(card, 0) + 1
        self._fault("foreign", position=hand, card=card, how=how, deck=deck)
        yield from self._send_card(card, hand, deck, foreign=True)
        return card

    def _result_frame(self, player: list[str], banker: list[str]) -> Frame:
        if self.protocol == ANGEL:
            return DeviceResult(
                0.0,
                None,
                _winner(player, banker),
                len(player) >= 2 and player[0][0] == player[1][0],
                len(banker) >= 2 and banker[0][0] == banker[1][0],
            )
        return Button(0.0, None, "RESULT")


class _CoupDeal:
    """One coup of a fake shoe dealt by the tableau, with the faults rolled
    for it: a foreign card at one of the first four positions, a jam or a
    disconnect after one of the first cards, a result pressed too early."""

    def __init__(self, fake: FakeShoe, shoe: _Shoe, number: int, coup: dict[str, Any]) -> None:
        self.fake = fake
        self.shoe = shoe
        self.number = number
        self.coup = coup
        rng = fake._fault_rng
        self.foreign_at = rng.randrange(4) if fake._roll("foreign") else None
        self.jam_after = rng.randrange(1, 4) if fake._roll("jam") else None
        self.disconnect_after = rng.randrange(1, 4) if fake._roll("disconnect") else None
        self.player: list[str] = coup["player"]
        self.banker: list[str] = coup["banker"]
        self.premature_done = False
        self.count = 0

    def deal(self) -> Generator[Chunk | Disconnect, None, bool]:
        """The coup's cards and its result; False if the shoe ran out."""
        fake, coup, player, banker = self.fake, self.coup, self.player, self.banker
        for hand in ("P1", "B1", "P2", "B2"):
            if (yield from self.card(hand)) is None:
                return False
        p, b = _total(player), _total(banker)
        coup["natural"] = p >= 8 or b >= 8
        if not coup["natural"]:
            third: int | None = None
            if p <= 5:
                yield from self.maybe_premature()
                card = yield from self.card("P3")
                if card is None:
                    return False
                third = _POINTS[card[0]]
            if banker_draws(b, third):
                yield from self.maybe_premature()
                if (yield from self.card("B3")) is None:
                    return False
        coup["winner"] = _winner(player, banker)
        if fake._roll("extra"):
            # An Angel Eye puts the card on the next free slot it has.
            slot = "P3" if len(player) < 3 else "B3" if len(banker) < 3 else "burn"
            extra = yield from fake._draw(self.shoe, "extra", self.number, report_as=slot)
            if extra is not None:
                coup["extra"].append(extra)
                fake._fault("extra", card=extra)
        yield from fake._send(fake._result_frame(player, banker))
        return True

    def card(self, hand: str) -> Generator[Chunk | Disconnect, None, str | None]:
        """The card dealt to ``hand`` (None: the shoe ran out), and the jam
        or disconnect that follows it if one was rolled for it."""
        fake = self.fake
        if self.count == self.foreign_at:
            card: str | None = yield from fake._deal_foreign(self.shoe, hand)
        else:
            card = yield from fake._draw(self.shoe, hand, self.number)
        if card is None:
            return None
        (self.player if hand[0] == "P" else self.banker).append(card)
        self.count += 1
        if self.count == self.jam_after:
            fake._fault("jam", after=hand)
            if fake.protocol == ANGEL:
                yield from fake._device_error("card pulled back midway")
            else:
                yield from fake._send(Status(0.0, None, "JAM"))
                yield from fake._send(Status(0.0, None, "OK"))
        if self.count == self.disconnect_after:
            lost = fake._fault_rng.randint(0, 2)
            fake._fault("disconnect", after=hand, lost=lost)
            yield Disconnect(fake._now(), fake.disconnect_downtime, lost)
            fake._us += fake._disconnect_us
            fake._lose_frames = lost
        return card

    def maybe_premature(self) -> Generator[Chunk, None, None]:
        """Once a coup, before a third card: the result pressed too early,
        if rolled."""
        if not self.premature_done:
            self.premature_done = True
            if self.fake._roll("premature"):
                self.fake._fault("premature", player=list(self.player), banker=list(self.banker))
                yield from self.fake._send(self.fake._result_frame(self.player, self.banker))


def _restamp(frame: Frame, t: float, seq: int) -> Frame:
    return replace(frame, t=t, seq=seq)


def _describe(frame: Frame) -> str:
    if isinstance(frame, Card):
        return f"CARD {frame.card or 'XX'}"
    if isinstance(frame, Button):
        return frame.name
    if isinstance(frame, Status):
        return f"STAT {frame.code}"
    if isinstance(frame, DeviceResult):
        return "RESULT"
    return type(frame).__name__.upper()


def _corrupt_checksum(protocol: str, data: bytes) -> bytes:
    """The same frame with a wrong checksum (the decoder must drop it)."""
    if protocol == BIN:
        return data[:-2] + bytes([data[-2] ^ 0xFF, data[-1] ^ 0xFF])
    if protocol == ASCII:
        star = data.rindex(b"*")
        ck = int(data[star + 1 : star + 3], 16) ^ 0x5A
        return data[: star + 1] + f"{ck:02X}".encode() + data[star + 3 :]
    # angel-eye: ... ETX BCC(two ASCII hex digits)
    ck = int(data[-2:], 16) ^ 0x5A
    return data[:-2] + f"{ck:02X}".encode()


# -- real-time pacing ------------------------------------------------------


def real_delay(fake: FakeShoe, dt: float, cards_per_second: float) -> float:
    """Real seconds for ``dt`` synthetic seconds when dealing at
    ``cards_per_second`` (0: no waiting at all)."""
    if cards_per_second <= 0:
        return 0.0
    return max(0.0, dt) / (fake.card_interval * cards_per_second)


class FakeDriver:
    """The fake shoe as an in-process :class:`drivers.base.Driver`, paced in
    real time at ``cards_per_second`` (0: as fast as the reader reads).

    Chunks are stamped with the real read time (``clock``), or with the
    fake's synthetic time when ``synthetic_time`` is true. A ``disconnect``
    fault shows as ``LinkEvent(up=False)`` then ``LinkEvent(up=True)``.
    Host writes are kept in :attr:`written` (the fake does not answer).
    """

    def __init__(
        self,
        fake: FakeShoe,
        cards_per_second: float | None = None,
        *,
        synthetic_time: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fake = fake
        self.cards_per_second = fake.cards_per_second if cards_per_second is None else cards_per_second
        self.synthetic_time = synthetic_time
        self._clock = clock
        self._items: Iterator[Chunk | Disconnect] | None = None
        self._pending: deque[tuple[float, Chunk | LinkEvent]] = deque()  # (synthetic due, item)
        self._base_real = 0.0
        self._base_t = fake.t0
        self.written: list[bytes] = []

    def open(self) -> None:
        if self._items is None:
            self._items = self.fake.events()
            self._base_real = time.monotonic()
            self._base_t = self.fake.t0

    def close(self) -> None:
        if self._items is not None:
            close = getattr(self._items, "close", None)
            if close is not None:
                close()
        self._items = None
        self._pending.clear()

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def _due(self, t: float) -> float:
        return self._base_real + real_delay(self.fake, t - self._base_t, self.cards_per_second)

    def _fill(self) -> bool:
        if self._pending:
            return True
        if self._items is None:
            raise RuntimeError("FakeDriver.read before open()")
        item = next(self._items, None)
        if item is None:
            return False
        if isinstance(item, Disconnect):
            self._pending.append((item.t, LinkEvent(item.t, False, "fake shoe disconnect")))
            up = item.t + item.downtime
            self._pending.append((up, LinkEvent(up, True, "fake shoe reconnected")))
        else:
            self._pending.append((item[0], item))
        return True

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        if not self._fill():
            time.sleep(max(0.0, timeout))  # every shoe dealt: the device is idle
            return None
        t_syn, item = self._pending[0]
        wait = self._due(t_syn) - time.monotonic()
        if wait > timeout:
            time.sleep(max(0.0, timeout))
            return None
        if wait > 0:
            time.sleep(wait)
        self._pending.popleft()
        now = t_syn if self.synthetic_time else self._clock()
        if isinstance(item, LinkEvent):
            return LinkEvent(now, item.up, item.detail)
        return (now, item[1])


# -- pseudo-terminal -------------------------------------------------------


def default_pty_link() -> str:
    """Where :func:`serve_pty` puts its stable symlink by default."""
    return os.path.join(tempfile.gettempdir(), f"shoe-controller-fake-{os.getpid()}")


class _Pty:
    """A raw pseudo-terminal whose slave is reachable at a stable symlink.

    The server holds only the master: the kernel then reports POLLHUP on it
    while no reader has the slave open, which is how the fake knows to wait
    for its reader (a real serial reader such as pyserial flushes the input
    queue when it opens the port, so bytes written before would be lost).
    """

    def __init__(self, link: str, settle: float) -> None:
        self.link = link
        self.settle = settle
        self.master = -1
        self.slave_name = ""
        self._poll = select.poll()
        self._attached_at: float | None = None
        self.create()

    def create(self) -> None:
        self.master, slave = os.openpty()
        try:
            tty.setraw(slave, termios.TCSANOW)  # kept by the line for later opens
            self.slave_name = os.ttyname(slave)
        finally:
            os.close(slave)
        os.set_blocking(self.master, False)
        self._poll = select.poll()
        self._poll.register(self.master, select.POLLIN | select.POLLHUP)
        self._attached_at = None
        tmp = f"{self.link}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(self.slave_name, tmp)
        os.replace(tmp, self.link)  # atomic: a reader never sees no link

    def attached(self) -> bool:
        """Whether a reader has the slave open."""
        hung_up = any(ev & select.POLLHUP for _, ev in self._poll.poll(0))
        if hung_up:
            self._attached_at = None
        elif self._attached_at is None:
            self._attached_at = time.monotonic()  # first seen now: it opened at or before
        return not hung_up

    def settling(self) -> float:
        """Seconds until the attached reader is surely done opening (0: it
        is), or ``inf`` with no reader."""
        if not self.attached() or self._attached_at is None:
            return float("inf")
        return max(0.0, self._attached_at + self.settle - time.monotonic())

    def unread(self) -> int:
        """Bytes written but not yet taken by the reader."""
        try:
            fd = os.open(self.slave_name, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return 0
        try:
            buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        finally:
            os.close(fd)
        n: int = struct.unpack("i", buf)[0]
        return n

    def drain_input(self) -> None:
        """Discard host commands the reader wrote (the fake does not answer)."""
        with contextlib.suppress(OSError):
            while os.read(self.master, 4096):
                pass

    def close(self) -> None:
        if self.master >= 0:
            with contextlib.suppress(OSError):
                os.close(self.master)
        self.master = -1

    def remove_link(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if os.path.islink(self.link):
                os.unlink(self.link)


class _Stopped(Exception):
    pass


def serve_pty(
    fake: FakeShoe,
    cards_per_second: float,
    on_ready: Callable[[str], None],
    *,
    link: str | None = None,
    stop: threading.Event | None = None,
    reconnect_delay: float = 0.5,
    settle: float = 0.2,
) -> None:
    """Serve the fake shoe on a pseudo-terminal until its shoes are dealt or
    ``stop`` is set.

    ``on_ready`` gets the stable path to open (a symlink to the current pty
    slave) before any byte is written. Bytes are written only while a reader
    has the port open (``settle`` s after it opened it, so that its opening
    flush is done): the stream pauses, losing nothing, while there is none.
    A ``disconnect`` fault waits until the reader has taken what was sent,
    closes the pty and, ``reconnect_delay`` s later, creates a new one at the
    same symlink. Writes are paced at ``cards_per_second``; at 0 they go as
    fast as the reader takes them.
    """
    path = link or default_pty_link()
    pty: _Pty | None = None
    last_t: float | None = None
    try:
        # inside the try: a signal right after the link is made still removes it
        pty = _Pty(path, settle)
        on_ready(path)
        for item in fake.events():
            t = item.t if isinstance(item, Disconnect) else item[0]
            if last_t is not None:
                _wait(pty, real_delay(fake, t - last_t, cards_per_second), stop)
            last_t = t
            if isinstance(item, Disconnect):
                _wait_until_read(pty, stop, limit=5.0)
                # The link goes first: once closed, the pts number may be
                # handed to another program, which the reader must not open.
                pty.remove_link()
                pty.close()
                _wait(None, reconnect_delay, stop)
                pty.create()
                last_t = t + item.downtime
                continue
            _write_all(pty, item[1], stop)
        # Let the reader take the tail before the pty goes away.
        _wait_until_read(pty, stop, limit=5.0)
    except _Stopped:
        pass
    finally:
        if pty is not None:
            pty.close()
            pty.remove_link()
        else:  # stopped while the first pty was being made
            with contextlib.suppress(FileNotFoundError):
                if os.path.islink(path):
                    os.unlink(path)


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped


def _wait(pty: _Pty | None, seconds: float, stop: threading.Event | None) -> None:
    """Sleep ``seconds``, discarding anything the reader writes meanwhile."""
    deadline = time.monotonic() + seconds
    while True:
        _check(stop)
        left = deadline - time.monotonic()
        if left <= 0:
            return
        step = min(left, 0.2)
        if pty is None or not pty.attached():
            # No reader: the master polls as hung up, so select would not block.
            time.sleep(min(step, 0.05))
            continue
        ready, _, _ = select.select([pty.master], [], [], step)
        if ready:
            pty.drain_input()


def _wait_for_reader(pty: _Pty, stop: threading.Event | None) -> None:
    while True:
        left = pty.settling()
        if left == 0.0:
            return
        _check(stop)
        if left == float("inf"):
            time.sleep(0.05)
        else:
            _wait(pty, left, stop)


def _wait_until_read(pty: _Pty, stop: threading.Event | None, limit: float) -> None:
    """Wait (at most ``limit`` s) until the reader has taken every byte.

    Bytes written to the master reach the slave's queue through a kernel
    work queue, so an empty queue counts only when seen empty twice, 20 ms
    apart, the first time 50 ms after the last write."""
    deadline = time.monotonic() + limit
    _wait(pty, 0.05, stop)
    empty = 0
    while empty < 2 and pty.attached() and time.monotonic() < deadline:
        empty = empty + 1 if pty.unread() == 0 else 0
        _wait(pty, 0.02, stop)


def _write_all(pty: _Pty, data: bytes, stop: threading.Event | None) -> None:
    view = memoryview(data)
    while view:
        _check(stop)
        _wait_for_reader(pty, stop)
        ready_r, ready_w, _ = select.select([pty.master], [pty.master], [], 0.2)
        if ready_r:
            pty.drain_input()
        if ready_w and pty.attached():
            try:
                n = os.write(pty.master, view)
            except BlockingIOError:
                continue
            view = view[n:]


def write_stream(
    fake: FakeShoe,
    out: IO[bytes],
    cards_per_second: float,
    stop: threading.Event | None = None,
) -> None:
    """Write the fake's byte stream to a binary file (``fake`` without
    ``--pty``), paced at ``cards_per_second`` (0: as fast as possible)."""
    last_t: float | None = None
    try:
        for t, data in fake.stream():
            if last_t is not None:
                _wait(None, real_delay(fake, t - last_t, cards_per_second), stop)
            last_t = t
            out.write(data)
            out.flush()
    except _Stopped:
        pass


__all__ = [
    "FAULT_KINDS",
    "MAX_CARDS_PER_SECOND",
    "PROTOCOLS",
    "Disconnect",
    "FakeDriver",
    "FakeShoe",
    "banker_draws",
    "check_cards_per_second",
    "default_pty_link",
    "parse_faults",
    "real_delay",
    "serve_pty",
    "write_stream",
]
