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


def make_decoder(name: str, baud: int | None = None) -> FrameDecoder:
    """A fresh decoder for protocol ``name``; ValueError naming the known
    protocols if there is no such protocol. ``baud``: the line's rate, for
    ``angel-eye/2`` (its seq cycle tells an exact loss from one of unknown
    size by the time the line needs; default 4800); the others ignore it."""
    if name == angel_eye.NAME and baud is not None:
        return angel_eye.Decoder(baud)
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


class AutoDecoder:
    """``protocol: auto``: holds the first reads until :func:`detect` names
    exactly one protocol, then decodes them, and everything after, with that
    protocol's decoder. Sans-IO and deterministic like every codec, so a
    journal re-fed after a crash detects the same protocol at the same read.

    While nothing matches, at most ``limit`` bytes are held (the oldest are
    dropped and counted as ``undetected``); :attr:`protocol` stays None and
    :attr:`held` says how many bytes are waiting, for the daemon's message.
    """

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self.protocol: str | None = None
        self._inner: FrameDecoder | None = None
        self._pending: list[tuple[float, bytes]] = []
        self.held = 0
        self._own: collections.Counter[str] = collections.Counter()

    @property
    def stats(self) -> collections.Counter[str]:
        if self._inner is None:
            return self._own
        return self._inner.stats + self._own

    def feed(self, t: float, data: bytes) -> list[Frame]:
        if self._inner is not None:
            return self._inner.feed(t, data)
        self._pending.append((t, bytes(data)))
        self.held += len(data)
        name = detect(b"".join(d for _, d in self._pending))
        if name is None:
            while self.held > self.limit and len(self._pending) > 1:
                _, old = self._pending.pop(0)
                self.held -= len(old)
                self._own["undetected"] += len(old)
            return []
        self.protocol = name
        self._inner = make_decoder(name)
        out: list[Frame] = []
        for t0, chunk in self._pending:
            out.extend(self._inner.feed(t0, chunk))
        self._pending = []
        self.held = 0
        return out

    def reset(self) -> None:
        if self._inner is not None:
            self._inner.reset()
