"""The protocol registry, and protocol autodetection from the first bytes a
device sends (as gpsd does: try every lexer, keep the one that finds a
frame).

``PROTOCOLS`` maps each protocol name (the ``protocol`` of a capture header
and of the config) to its decoder and encoder classes; :func:`make_decoder`
and :func:`make_encoder` build them by name. :func:`detect` names the
protocol of a byte sample when exactly one codec finds a checksummed frame
in it, and says ``None`` (read more, or ask the operator) otherwise.
"""

from __future__ import annotations

import collections
from typing import Protocol

from firmware_protocols import angel_eye, shoe_ascii, shoe_bin
from firmware_protocols.frames import Ack, Frame, SequenceGap


class FrameDecoder(Protocol):
    """What every codec's ``Decoder`` offers (see ``firmware_protocols``)."""

    stats: collections.Counter[str]

    def feed(self, t: float, data: bytes) -> list[Frame]: ...

    def reset(self) -> None: ...


class FrameEncoder(Protocol):
    """What every codec's ``Encoder`` offers."""

    def encode(self, frame: Frame) -> bytes: ...


PROTOCOLS: dict[str, tuple[type[FrameDecoder], type[FrameEncoder]]] = {
    shoe_ascii.NAME: (shoe_ascii.Decoder, shoe_ascii.Encoder),
    shoe_bin.NAME: (shoe_bin.Decoder, shoe_bin.Encoder),
    angel_eye.NAME: (angel_eye.Decoder, angel_eye.Encoder),
}

# Frames that prove nothing about the protocol: a gap is synthesised, and an
# Angel Eye ACK is one unchecked byte that any binary stream may contain.
_UNPROVEN = (SequenceGap, Ack)


def _lookup(name: str) -> tuple[type[FrameDecoder], type[FrameEncoder]]:
    try:
        return PROTOCOLS[name]
    except KeyError:
        known = ", ".join(PROTOCOLS)
        raise ValueError(f"unknown protocol {name!r}; known protocols: {known}") from None


def make_decoder(name: str) -> FrameDecoder:
    """A fresh decoder for protocol ``name``; ValueError naming the known
    protocols if there is no such protocol."""
    return _lookup(name)[0]()


def make_encoder(name: str) -> FrameEncoder:
    """An encoder for protocol ``name``; ValueError naming the known
    protocols if there is no such protocol."""
    return _lookup(name)[1]()


def detect(data: bytes) -> str | None:
    """The protocol of ``data`` (the first bytes read from a device) when
    exactly one codec decodes at least one checksummed frame from it;
    ``None`` when none does (too few bytes yet, or only noise) or when more
    than one does (ambiguous: read more)."""
    found = []
    for name, (decoder_class, _) in PROTOCOLS.items():
        frames = decoder_class().feed(0.0, data)
        if any(not isinstance(f, _UNPROVEN) for f in frames):
            found.append(name)
    return found[0] if len(found) == 1 else None
