"""Framing helpers shared by the codecs: the frame sequence, the XOR
checksum, and the signal for a frame whose content breaks its protocol.

Each codec owns its own framing (markers, lengths, escapes); what they have
in common lives here, once, so a fix to the sequence arithmetic reaches
every protocol. Angel Eye's learned seq cycle (``angel_eye.SeqCycle``)
stays with that codec: it rests on Angel Eye's line timing and seq
characters, which no other protocol has.
"""

from __future__ import annotations

from functools import reduce
from operator import xor

from firmware_protocols.frames import SequenceGap


class Malformed(Exception):
    """A frame whose checksum verified but whose content breaks the
    protocol; the codec drops it and counts it as ``malformed``."""


def xor8(data: bytes) -> int:
    """The XOR of every byte of ``data`` (0 for none): the checksum of
    shoe-ascii/1 (``*HH``) and Angel Eye (BCC)."""
    return reduce(xor, data, 0)


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
