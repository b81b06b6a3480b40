"""Fuzz target: wire bytes through each of the three protocol decoders
(``shoe-ascii/1``, ``shoe-bin/1``, ``angel-eye/2``), read in chunks.

Input: one byte ``n`` (taken modulo 8), ``n`` chunk sizes (cycled; 0 = the
rest at once), then the stream.

Invariants, for each decoder:

- ``feed`` never raises, and the stream split into chunks read at one time
  decodes to the same frames and the same ``stats`` as in one read (the
  time matters to ``angel-eye/2``'s seq cycle, not the chunking);
- every frame is stamped with the time of one of the reads;
- every card is a valid code (or None, unread), decks 1-12, hands known;
- nothing is invented: each frame other than a synthesised SequenceGap
  re-encodes, with the protocol's own Encoder, to bytes found in the input
  (for ``shoe-ascii/1`` whatever the talker, with a verifying checksum; for
  ``angel-eye/2`` whatever the bits the decoder documents as ignored), and
  no frame is yielded more times than its encoding occurs;
- a SequenceGap is consistent: ``expected + missing == seq`` modulo the
  protocol's sequence, 1 <= missing < modulus (``angel-eye/2``, whose seq is
  an opaque character of a cycle it learns: 1 <= missing < 256);
- ``stats`` counts are non-negative integers, ``frames`` is the number of
  frames yielded (gaps aside) and ``sequence_gap`` the number of gaps.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import sys
from collections.abc import Callable, Iterator
from functools import reduce
from operator import xor

from fuzz import _harness

with _harness.instrumented():
    from controller.cards import ALL_CARDS
    from firmware_protocols import angel_eye, shoe_ascii, shoe_bin
    from firmware_protocols.frames import Card, Frame, SequenceGap
    from fuzz import corpus

T0 = 1_763_800_000.0
CARDS = frozenset(ALL_CARDS)
HANDS = frozenset({"P1", "P2", "P3", "B1", "B2", "B3", "burn", "first", "burn_count"})
TOKENS = [
    b"$SH,",
    b"$AS,",
    b"$HO,",
    b",CARD,",
    b",HELLO,",
    b",BTN,RESULT",
    b",STAT,JAM",
    b",SHUF,",
    b",ORD,0,",
    b"*00\r\n",
    b"\r\n",
    b",XX",
    b"\xa5\x5a",
    b"\xa5\x5a\x03\x10",
    b"\x05\x00D",
    b"\x03",
    b"\x02OPLK02\x03",
    b"\x06",
    b"\x15",
]


class DecoderInvariantError(AssertionError):
    pass


def chunks_of(data: bytes) -> tuple[list[bytes], bytes]:
    """The reads an input describes, and the stream they make."""
    if not data:
        return [], b""
    n = data[0] % 8
    plan = list(data[1 : 1 + n])
    stream = data[1 + n :]
    reads = []
    pos = 0
    i = 0
    while pos < len(stream):
        size = plan[i % len(plan)] if plan else 0
        i += 1
        end = len(stream) if size == 0 else pos + size
        reads.append(stream[pos:end])
        pos = end
    return reads, stream


def occurrences(needle: bytes, haystack: bytes) -> int:
    """How many times ``needle`` occurs, overlaps included."""
    count = 0
    i = haystack.find(needle)
    while i >= 0:
        count += 1
        i = haystack.find(needle, i + 1)
    return count


# --- what a frame may have come from, per protocol ----------------------------


def ascii_sources(frame: Frame, stream: bytes) -> int:
    """Occurrences of ``frame``'s encoding in ``stream``, any talker, with a
    checksum that verifies for that talker."""
    raw = shoe_ascii.Encoder().encode(frame)
    rest = raw[raw.index(b",") : raw.index(b"*")]  # ",<seq>,<type>,..." after the talker
    count = 0
    pattern = re.compile(rb"\$([^$*,\r\n]+)" + re.escape(rest) + rb"\*([0-9A-F]{2})\r\n")
    for m in pattern.finditer(stream):
        body = m.group(1) + rest
        if reduce(xor, body, 0) == int(m.group(2), 16):
            count += 1
    return count


def bin_sources(frame: Frame, stream: bytes) -> int:
    return occurrences(shoe_bin.Encoder().encode(frame), stream)


def _angel_message(seq: int, data: bytes) -> bytes:
    body = bytes([seq & 0xFF]) + data + b"\x03"
    return b"\x05" + body + b"%02X" % reduce(xor, body, 0)


def _no_hand_targets() -> list[int]:
    """Target bytes of a ``d`` that name no hand (the shoe's mode)."""
    out = []
    for b in range(128):
        group, index = b >> 4, b & 0x0F
        if (group in (0, 1) and not 1 <= index <= 3) or group in (3, 6, 7):
            out.append(b)
    return out


_NO_HAND = _no_hand_targets()


def angel_candidates(frame: Frame) -> Iterator[bytes]:
    """Every message the decoder reads as ``frame``: its encoding, and the
    variants in the bits the decoder documents as don't-care (bit 7 of every
    data byte after the command letter; the index nibble of burn / first /
    burn_count targets; the target of a ``d`` that names no hand)."""
    raw = angel_eye.Encoder().encode(frame)
    if frame.seq is None or raw[0] != angel_eye.ENQ:  # host commands and answers
        yield raw
        return
    letter = raw[2]
    data = raw[3:-3]
    if letter == ord("M") or not data:
        yield raw
        return
    if isinstance(frame, Card):
        target, cb = data
        if frame.hand is None:
            targets = _NO_HAND
        elif frame.hand in ("burn", "first", "burn_count"):
            targets = [(target & 0x70) | index for index in range(16)]
        else:
            targets = [target & 0x7F]
        for tb in targets:
            for hi_t in (0, 0x80):
                for hi_c in (0, 0x80):
                    yield _angel_message(raw[1], bytes([letter, tb | hi_t, (cb & 0x7F) | hi_c]))
        return
    for hi in (0, 0x80):
        yield _angel_message(raw[1], bytes([letter, (data[0] & 0x7F) | hi]))


def angel_sources(frame: Frame, stream: bytes) -> int:
    return sum(occurrences(c, stream) for c in angel_candidates(frame))


@dataclasses.dataclass(frozen=True)
class Protocol:
    name: str
    decoder: Callable[[], shoe_ascii.Decoder | shoe_bin.Decoder | angel_eye.Decoder]
    sources: Callable[[Frame, bytes], int]
    modulus: int
    counter: bool = True  # the seq counts up by one (else: an opaque character)


PROTOCOLS = (
    Protocol(shoe_ascii.NAME, shoe_ascii.Decoder, ascii_sources, shoe_ascii.SEQ_MODULUS),
    Protocol(shoe_bin.NAME, shoe_bin.Decoder, bin_sources, shoe_bin.SEQ_MODULUS),
    Protocol(angel_eye.NAME, angel_eye.Decoder, angel_sources, angel_eye.SEQ_BYTES, counter=False),
)


def _fail(proto: Protocol, message: str) -> DecoderInvariantError:
    return DecoderInvariantError(f"{proto.name}: {message}")


def check_frame(proto: Protocol, f: Frame, times: set[float]) -> None:
    if f.t not in times:
        raise _fail(proto, f"frame stamped {f.t}, not the time of any read: {f!r}")
    if f.seq is not None and not 0 <= f.seq < proto.modulus:
        raise _fail(proto, f"seq out of range: {f!r}")
    if isinstance(f, Card):
        if f.card is not None and f.card not in CARDS:
            raise _fail(proto, f"not a card code: {f!r}")
        if f.deck is not None and not 1 <= f.deck <= 12:
            raise _fail(proto, f"deck out of range: {f!r}")
        if f.hand is not None and f.hand not in HANDS:
            raise _fail(proto, f"unknown hand: {f!r}")
    if isinstance(f, SequenceGap):
        m = proto.modulus
        if (
            f.seq is None
            or not 1 <= f.missing < m
            or not 0 <= f.expected < m
            or (proto.counter and (not f.exact or (f.expected + f.missing) % m != f.seq))
        ):
            raise _fail(proto, f"inconsistent gap: {f!r}")


def check_protocol(proto: Protocol, reads: list[bytes], stream: bytes) -> None:
    decoder = proto.decoder()
    frames: list[Frame] = []
    for i, data in enumerate(reads):
        frames += decoder.feed(T0 + i, data)
    chunked = proto.decoder()
    same_time: list[Frame] = []
    for data in reads:
        same_time += chunked.feed(T0, data)
    whole = proto.decoder()
    at_once = whole.feed(T0, stream)
    if same_time != at_once:
        raise _fail(proto, "the same bytes in other reads decode to other frames")
    if +chunked.stats != +whole.stats:
        raise _fail(proto, f"the same bytes in other reads count otherwise: {chunked.stats} != {whole.stats}")
    times = {T0 + i for i in range(len(reads))}
    seen: collections.Counter[Frame] = collections.Counter()
    gaps = 0
    for f in frames:
        check_frame(proto, f, times)
        if isinstance(f, SequenceGap):
            gaps += 1
            continue
        key = dataclasses.replace(f, t=T0)
        seen[key] += 1
        try:
            found = proto.sources(key, stream)
        except ValueError as exc:
            raise _fail(proto, f"yielded a frame its own encoder refuses ({exc}): {f!r}") from None
        if seen[key] > found:
            raise _fail(proto, f"yielded {seen[key]} times, present {found} times in the input: {f!r}")
    stats = decoder.stats
    for reason, count in stats.items():
        if not isinstance(count, int) or count < 0:
            raise _fail(proto, f"stats[{reason!r}] = {count!r}")
    if stats["frames"] != len(frames) - gaps or stats["sequence_gap"] != gaps:
        raise _fail(proto, f"stats {dict(stats)} for {len(frames) - gaps} frames and {gaps} gaps")


def test_one_input(data: bytes) -> None:
    reads, stream = chunks_of(data)
    for proto in PROTOCOLS:
        check_protocol(proto, reads, stream)


if __name__ == "__main__":
    _harness.main(test_one_input, corpus.decoder_seeds, TOKENS, sys.argv)
