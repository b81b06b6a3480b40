"""Framing helpers shared by the codecs: the frame sequence, the XOR
checksum, and the signal for a frame whose content breaks its protocol.

Each codec owns its own framing (markers, lengths, escapes); what they have
in common lives here, once, so a fix to the sequence arithmetic reaches
every protocol. Angel Eye's learned seq cycle (``angel_eye.SeqCycle``)
stays with that codec: it rests on Angel Eye's line timing and seq
characters, which no other protocol has.
"""

from __future__ import annotations

from dataclasses import fields
from functools import reduce
from operator import xor

from firmware_protocols.frames import Card, SequenceGap


class Malformed(Exception):
    """A frame whose checksum verified but whose content breaks the
    protocol; the codec drops it and counts it as ``malformed``."""


def xor8(data: bytes) -> int:
    """The XOR of every byte of ``data`` (0 for none): the checksum of
    shoe-ascii/1 (``*HH``) and Angel Eye (BCC)."""
    return reduce(xor, data, 0)


#: The setters of Card's slots, in field order: ``object.__new__(Card)``
#: then each called once is ``Card(...)`` (see :func:`new_card`).
CARD_SETTERS = tuple(getattr(Card, f.name).__set__ for f in fields(Card))
# (unpacking fails at import if Card gains or loses a field, rather than
# leaving a slot unset)
_CT, _CS, _CC, _CF, _CD, _CH, _CG = CARD_SETTERS
_new = object.__new__


def new_card(
    t: float,
    seq: int | None,
    card: str | None,
    face_up: bool = False,
    deck: int | None = None,
    hand: str | None = None,
    game: bool = True,
) -> Card:
    """``Card(t, seq, card, face_up, deck, hand, game)``, equal in every
    way, built at half the cost: a frozen dataclass's ``__init__`` sets each
    field through ``object.__setattr__`` (about 1.1 us for Card's seven on
    CPython 3.11), this sets the slots through their descriptors. For the
    codecs' hot path, one Card per card dealt."""
    c = _new(Card)
    _CT(c, t)
    _CS(c, seq)
    _CC(c, card)
    _CF(c, face_up)
    _CD(c, deck)
    _CH(c, hand)
    _CG(c, game)
    return c


class SequenceTracker:
    """The device frame sequence of shoe-ascii/1 and shoe-bin/1: +1 per
    frame, wrapping at ``modulus``; a restart (HELLO) accepts any number.

    ``last`` is the previous frame's number (a frame carrying it again is a
    duplicate); :meth:`advance` returns the :class:`SequenceGap` to emit
    before a frame whose number skips some.
    """

    __slots__ = ("last", "modulus")

    def __init__(self, modulus: int) -> None:
        self.modulus = modulus
        self.last: int | None = None

    def reset(self) -> None:
        self.last = None

    def advance(self, t: float, seq: int, restart: bool = False) -> SequenceGap | None:
        """Record ``seq`` as received; returns the gap it reveals, if any."""
        last = self.last
        self.last = seq
        if restart or last is None:
            return None
        expected = (last + 1) % self.modulus
        if seq == expected:
            return None
        return SequenceGap(t=t, seq=seq, expected=expected, missing=(seq - expected) % self.modulus)
