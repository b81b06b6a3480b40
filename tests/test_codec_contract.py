"""What every codec promises (docs/devices.md), as one contract run against
``shoe-ascii/1``, ``shoe-bin/1`` and ``angel-eye/2`` through their public
``Decoder``/``Encoder`` only.

The contract:

- every frame type a codec carries round-trips: the device's transmission
  of a frame (Angel Eye sends each message three times) decodes to that
  frame once and counts one frame;
- any chunking of the byte stream gives the same frames and the same stats,
  and frames are stamped with the time of the chunk that completed them;
- bytes outside any frame are dropped, counted in bytes, and change no
  frame; an unopened frame is garbage and the next frame decodes; an
  unclosed one waits for its last byte;
- a frame whose checksum is corrupted is dropped, counted once as
  ``bad_checksum``, and nothing else is lost;
- a repeat of the last message is dropped and counted as ``duplicate``;
- a loss is never overstated: a reported :class:`SequenceGap` misses at most
  the frames really lost, and an ``exact`` one exactly those. A counting
  sequence (shoe-ascii/1, shoe-bin/1: +1 per frame modulo 65536) reports
  every loss, exactly; Angel Eye's seq is a character of a cycle it learns
  from the stream, so a gap is exact only once the cycle is known and the
  silence was too short to hide a whole cycle (angel_eye's docstring);
- a malformed frame does not advance the sequence, so its loss shows as a
  gap; the first frame (and the first after ``reset``) establishes the
  sequence; ``reset`` drops a partial frame as ``truncated``;
- no byte string makes the decoder raise or yield a frame that was not
  sent intact, and the stats agree with what was yielded.

What only one codec does (its wire layout, its strictness, Angel Eye's
cycle learning and host commands) stays in that codec's own test module.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from operator import xor
from typing import Protocol

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from firmware_protocols import angel_eye, shoe_ascii, shoe_bin
from firmware_protocols.frames import (
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    HostRequest,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)

T = 1763800000.25
ALL_CARDS = [r + s for s in "SHDC" for r in "A23456789TJQK"]


class _Decoder(Protocol):
    @property
    def stats(self) -> Counter[str]: ...

    def feed(self, t: float, data: bytes) -> list[Frame]: ...

    def reset(self) -> None: ...


@dataclass(frozen=True, repr=False)
class Codec:
    """One protocol as the contract sees it."""

    name: str
    new_decoder: Callable[[], _Decoder]
    encode: Callable[[Frame], bytes]
    #: every frame type the codec carries, with a strategy of frames of it
    carries: dict[type, st.SearchStrategy[Frame]]
    #: bytes that never start a frame (garbage the decoder must skip whole)
    garbage: st.SearchStrategy[bytes]
    #: copies of each message the device sends
    copies: int
    #: the modulus of a counting sequence; None: a learned cycle (Angel Eye)
    modulus: int | None
    #: a frame of no sequence meaning (not a restart), at ``seq``
    plain: Callable[[int, int], Frame]
    #: the seq of the i-th message of a stream starting at ``start``
    seq_of: Callable[[int, int], int]
    #: a message whose checksum no longer fits, all else intact
    break_checksum: Callable[[bytes], bytes]
    #: a checksummed message whose content the protocol refuses, at ``seq``
    malformed: Callable[[int], bytes]
    #: the bytes of ``frame`` any well-formed sender puts on the wire
    signature: Callable[[Frame], bytes]
    #: every reason the decoder's stats may name
    stat_keys: frozenset[str]

    def transmit(self, frame: Frame) -> bytes:
        return self.encode(frame) * self.copies

    def decode(self, data: bytes, t: float = T) -> tuple[list[Frame], _Decoder]:
        d = self.new_decoder()
        return d.feed(t, data), d

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


seqs16 = st.integers(0, 65535)
maybe_cards = st.one_of(st.none(), st.sampled_from(ALL_CARDS))
status_codes = st.sampled_from(["OK", "JAM", "EMPTY", "LID_OPEN", "READER_FAULT", "LOW_POWER"])


# -- shoe-ascii/1 ----------------------------------------------------------------

ascii_texts = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters=",*$"), max_size=20
)


def _ascii_break_checksum(raw: bytes) -> bytes:
    star = raw.rindex(b"*")
    ck = int(raw[star + 1 : star + 3], 16)
    return raw[: star + 1] + b"%02X" % (ck ^ 0x01) + raw[star + 3 :]


def _ascii_frame(body: str) -> bytes:
    b = body.encode("ascii")
    return b"$%s*%02X\r\n" % (b, reduce(xor, b, 0))


def _after_talker(frame: Frame) -> bytes:
    """``,<seq>,<type>...*`` of an encoded frame: the decoder takes any talker."""
    raw = shoe_ascii.Encoder().encode(frame)
    return raw[raw.index(b",") : raw.index(b"*") + 1]


SHOE_ASCII = Codec(
    name="shoe-ascii/1",
    new_decoder=shoe_ascii.Decoder,
    encode=shoe_ascii.Encoder().encode,
    carries={
        Hello: st.builds(Hello, st.just(T), seqs16, ascii_texts, ascii_texts, ascii_texts),
        Card: st.builds(
            Card, st.just(T), seqs16, maybe_cards, st.booleans(), st.one_of(st.none(), st.integers(1, 12))
        ),
        Button: st.builds(Button, st.just(T), seqs16, st.sampled_from(["NEWSHOE", "RESULT"])),
        CutCard: st.builds(CutCard, st.just(T), seqs16),
        Status: st.builds(Status, st.just(T), seqs16, status_codes, ascii_texts),
        ShuffleCommit: st.builds(
            ShuffleCommit,
            st.just(T),
            seqs16,
            ascii_texts,
            st.integers(0, 65535),
            st.text("0123456789abcdef", min_size=64, max_size=64),
        ),
        ShuffleOrder: st.builds(
            ShuffleOrder,
            st.just(T),
            seqs16,
            st.integers(0, 65535),
            st.lists(maybe_cards, min_size=1, max_size=16).map(tuple),
        ),
        HostRequest: st.builds(HostRequest, st.just(T), seqs16, st.sampled_from(["STAT", "HELLO"])),
    },
    garbage=st.binary(max_size=40).map(lambda b: b.replace(b"$", b"")),
    copies=1,
    modulus=65536,
    plain=lambda seq, i: Card(T, seq, ALL_CARDS[i % 52]),
    seq_of=lambda start, i: (start + i) % 65536,
    break_checksum=_ascii_break_checksum,
    malformed=lambda seq: _ascii_frame(f"SH,{seq},CARD,ZZ"),
    signature=_after_talker,
    stat_keys=frozenset(
        {
            "garbage",
            "truncated",
            "too_long",
            "malformed",
            "bad_checksum",
            "duplicate",
            "sequence_gap",
            "frames",
        }
    ),
)


# -- shoe-bin/1 ------------------------------------------------------------------

bin_texts = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


def _bin_malformed(seq: int) -> bytes:
    body = bytes([3, 0x10]) + seq.to_bytes(2, "little") + b"\x99\x00\x00"  # card byte 0x99: no card
    return b"\xa5\x5a" + body + shoe_bin.crc16_ccitt_false(body).to_bytes(2, "little")


SHOE_BIN = Codec(
    name="shoe-bin/1",
    new_decoder=shoe_bin.Decoder,
    encode=shoe_bin.Encoder().encode,
    carries={
        Hello: st.builds(Hello, st.just(T), seqs16, bin_texts, bin_texts, bin_texts),
        Card: st.builds(
            Card, st.just(T), seqs16, maybe_cards, st.booleans(), st.one_of(st.none(), st.integers(1, 12))
        ),
        Button: st.builds(Button, st.just(T), seqs16, st.sampled_from(["NEWSHOE", "RESULT"])),
        CutCard: st.builds(CutCard, st.just(T), seqs16),
        Status: st.builds(Status, st.just(T), seqs16, status_codes),
        ShuffleCommit: st.builds(
            ShuffleCommit,
            st.just(T),
            seqs16,
            st.just(""),
            st.integers(0, 65535),
            st.binary(min_size=32, max_size=32).map(bytes.hex),
        ),
        ShuffleOrder: st.builds(
            ShuffleOrder,
            st.just(T),
            seqs16,
            st.integers(0, 65535),
            st.lists(maybe_cards, min_size=1, max_size=60).map(tuple),
        ),
    },
    garbage=st.binary(max_size=40).filter(lambda b: b"\xa5\x5a" not in b),
    copies=1,
    modulus=65536,
    plain=lambda seq, i: Card(T, seq, ALL_CARDS[i % 52]),
    seq_of=lambda start, i: (start + i) % 65536,
    break_checksum=lambda raw: raw[:-1] + bytes([raw[-1] ^ 0x01]),
    malformed=_bin_malformed,
    signature=shoe_bin.Encoder().encode,
    stat_keys=frozenset(
        {"garbage", "truncated", "malformed", "bad_checksum", "duplicate", "sequence_gap", "frames"}
    ),
)


# -- angel-eye/2 -----------------------------------------------------------------

seqs8 = st.integers(0, 255)
ae_hands = st.sampled_from(["P1", "P2", "P3", "B1", "B2", "B3", "burn", "first", "burn_count"])
ae_error_texts = st.builds(
    lambda code, mode: (
        (angel_eye.ERROR_REASONS.get(code) or f"error code {code}") + (" (in error mode)" if mode else "")
    ),
    st.integers(0, 63),
    st.booleans(),
)
ae_printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=6, max_size=6)


def _ae_msg(seq: int, data: bytes) -> bytes:
    body = bytes([seq]) + data + b"\x03"
    return b"\x05" + body + b"%02X" % reduce(xor, body, 0)


def _ae_break_checksum(raw: bytes) -> bytes:
    bcc = int(raw[-2:], 16)
    return raw[:-2] + b"%02X" % (bcc ^ 0x01)


#: The cycle of seq characters the contract's Angel Eye streams use (the
#: public C# integration's ``'0'``-``'F'``).
AE_CYCLE = b"0123456789ABCDEF"

ANGEL_EYE = Codec(
    name="angel-eye/2",
    new_decoder=angel_eye.Decoder,
    encode=angel_eye.Encoder().encode,
    carries={
        Hello: st.builds(Hello, st.just(T), seqs8, st.just("ANGEL-EYE"), st.just(""), st.just("")),
        Button: st.builds(Button, st.just(T), seqs8, st.sampled_from(["STANDBY", "REDEAL"])),
        CutCard: st.builds(CutCard, st.just(T), seqs8),
        Card: st.builds(
            lambda seq, card, hand, game: Card(T, seq, card, hand=hand, game=game),
            seqs8,
            st.sampled_from(ALL_CARDS),
            ae_hands,
            st.booleans(),
        ),
        DeviceResult: st.builds(
            DeviceResult,
            st.just(T),
            seqs8,
            st.sampled_from(["player", "banker", "tie", "quit"]),
            st.booleans(),
            st.booleans(),
        ),
        Status: st.one_of(
            st.builds(Status, st.just(T), seqs8, st.just("ERROR"), ae_error_texts),
            st.builds(
                Status, st.just(T), seqs8, st.just("OK"), ae_error_texts.map(lambda s: "error cleared: " + s)
            ),
            st.builds(Status, st.just(T), seqs8, st.sampled_from(["LOCKED", "UNLOCKED"])),
            st.builds(
                Status, st.just(T), seqs8, st.just("PRESET"), ae_printable.map(lambda s: f"{s[:2]}={s[2:]}")
            ),
        ),
        HostRequest: st.builds(
            HostRequest,
            st.just(T),
            st.none(),
            st.builds(lambda c, n: f"{c}{n:02d}", st.sampled_from(["LK", "EC", "GP"]), st.integers(0, 99)),
        ),
        Ack: st.one_of(
            st.builds(Ack, st.just(T), st.none(), st.just(True)),
            st.builds(
                Ack, st.just(T), st.none(), st.just(False), st.text("0123456789ABC", min_size=2, max_size=2)
            ),
        ),
    },
    garbage=st.binary(max_size=40).map(lambda b: bytes(c for c in b if c not in b"\x02\x05\x06\x15")),
    copies=3,
    modulus=None,
    plain=lambda seq, i: Card(T, seq, ALL_CARDS[i % 52], hand="P1"),
    seq_of=lambda start, i: AE_CYCLE[(start + i) % len(AE_CYCLE)],
    break_checksum=_ae_break_checksum,
    malformed=lambda seq: _ae_msg(seq, b"D\x81\x80"),  # card byte 0x80: no card
    signature=angel_eye.Encoder().encode,
    stat_keys=frozenset(
        {
            "garbage",
            "truncated",
            "malformed",
            "bad_checksum",
            "duplicate",
            "conflicting_duplicate",
            "unknown_message",
            "sequence_gap",
            "sequence_gap_unknown_size",
            "frames",
        }
    ),
)

CODECS = [SHOE_ASCII, SHOE_BIN, ANGEL_EYE]
COUNTING = [c for c in CODECS if c.modulus is not None]
by_codec = pytest.mark.parametrize("codec", CODECS, ids=str)
by_frame_type = pytest.mark.parametrize(
    ("codec", "ftype"),
    [(c, ft) for c in CODECS for ft in c.carries],
    ids=[f"{c}-{ft.__name__}" for c in CODECS for ft in c.carries],
)


def any_frame(codec: Codec) -> st.SearchStrategy[Frame]:
    return st.one_of(*codec.carries.values())


def sequenced(codec: Codec, start: int, n: int) -> list[Frame]:
    """``n`` plain frames with the consecutive seqs the device gives them."""
    return [codec.plain(codec.seq_of(start, i), i) for i in range(n)]


def gaps(frames: list[Frame]) -> list[SequenceGap]:
    return [f for f in frames if isinstance(f, SequenceGap)]


def not_gaps(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if not isinstance(f, SequenceGap)]


def assert_stats_agree(codec: Codec, frames: list[Frame], stats: Counter[str]) -> None:
    """The stats name only documented reasons, count every frame yielded and
    every gap reported, and are never negative."""
    named = {k for k, v in stats.items() if v}
    assert named <= codec.stat_keys, sorted(named - codec.stat_keys)
    assert all(v >= 0 for v in stats.values())
    assert stats.get("frames", 0) == len(not_gaps(frames))
    assert stats.get("sequence_gap", 0) == len(gaps(frames))
    assert stats.get("sequence_gap_unknown_size", 0) == len([g for g in gaps(frames) if not g.exact])


@st.composite
def chunkings(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=20)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


# -- every frame type round-trips ------------------------------------------------


@by_frame_type
@given(data=st.data())
def test_every_frame_type_round_trips_through_the_devices_transmission(
    codec: Codec, ftype: type, data: st.DataObject
) -> None:
    frame = data.draw(codec.carries[ftype])
    assert type(frame) is ftype
    frames, d = codec.decode(codec.transmit(frame))
    # a message with a seq is decoded once however often it is sent; host
    # frames and answers carry none, so each copy is one
    assert frames == [frame] * (1 if frame.seq is not None else codec.copies)
    expected = {"frames": len(frames), "duplicate": codec.copies - len(frames)}
    assert {k: v for k, v in d.stats.items() if v} == {k: v for k, v in expected.items() if v}


# -- chunking and time stamps ------------------------------------------------------


@by_codec
@given(data=st.data())
def test_split_into_any_chunks_the_stream_decodes_to_the_same_frames_and_stats(
    codec: Codec, data: st.DataObject
) -> None:
    stream = b"".join(codec.transmit(f) for f in data.draw(st.lists(any_frame(codec), max_size=12)))
    whole, d1 = codec.decode(stream)
    d2 = codec.new_decoder()
    chunked: list[Frame] = []
    for chunk in data.draw(chunkings(stream)):
        chunked += d2.feed(T, chunk)
    assert chunked == whole
    assert d2.stats == d1.stats


@by_codec
def test_frames_fed_byte_by_byte_decode_as_whole(codec: Codec) -> None:
    sent = sequenced(codec, 3, 2)
    stream = b"".join(codec.transmit(f) for f in sent)
    d = codec.new_decoder()
    out: list[Frame] = []
    for i in range(len(stream)):
        out += d.feed(T, stream[i : i + 1])
    assert out == sent
    assert_stats_agree(codec, out, d.stats)


@by_codec
def test_frames_are_stamped_with_the_time_of_the_chunk_that_completed_them(codec: Codec) -> None:
    a, b = (codec.encode(f) for f in sequenced(codec, 3, 2))
    d = codec.new_decoder()
    assert d.feed(1.0, a[:1]) == []
    (first,) = d.feed(2.0, a[1:] + b[:3])
    (second,) = d.feed(3.0, b[3:])
    assert (first.t, second.t) == (2.0, 3.0)


@by_codec
def test_an_unclosed_frame_waits_for_its_last_byte(codec: Codec) -> None:
    (frame,) = sequenced(codec, 3, 1)
    raw = codec.encode(frame)
    d = codec.new_decoder()
    assert d.feed(T, raw[:-1]) == []
    assert not any(d.stats.values())
    assert d.feed(T, raw[-1:]) == [frame]


@by_codec
def test_reset_drops_a_partial_frame_as_truncated(codec: Codec) -> None:
    a, b = sequenced(codec, 3, 2)
    d = codec.new_decoder()
    d.feed(T, codec.encode(a)[:4])
    d.reset()
    assert d.stats["truncated"] == 1
    assert d.feed(T, codec.encode(a)[4:] + codec.encode(b)) == [b]


# -- garbage ----------------------------------------------------------------------


@by_codec
@given(data=st.data())
def test_garbage_between_frames_is_counted_in_bytes_and_changes_no_frame(
    codec: Codec, data: st.DataObject
) -> None:
    pairs = data.draw(st.lists(st.tuples(codec.garbage, any_frame(codec)), max_size=10))
    tail = data.draw(codec.garbage)
    clean = b"".join(codec.encode(f) for _, f in pairs)
    noisy = b"".join(g + codec.encode(f) for g, f in pairs) + tail
    expected, _ = codec.decode(clean)
    d = codec.new_decoder()
    frames = d.feed(T, noisy)
    d.reset()  # (shoe-bin/1 holds a trailing A5 back as a possible marker half)
    assert frames == expected
    assert d.stats["garbage"] == sum(len(g) for g, _ in pairs) + len(tail)


@by_codec
def test_an_unopened_frame_is_garbage_and_the_next_frame_decodes(codec: Codec) -> None:
    a, b = sequenced(codec, 3, 2)
    raw = codec.encode(a)
    frames, d = codec.decode(raw[2:] + codec.encode(b))
    assert frames == [b]
    assert d.stats["garbage"] == len(raw) - 2


# -- checksums ---------------------------------------------------------------------


@by_codec
@given(n=st.integers(2, 20), start=st.integers(0, 65535), data=st.data())
def test_a_corrupted_checksum_drops_exactly_that_frame_and_counts_it(
    codec: Codec, n: int, start: int, data: st.DataObject
) -> None:
    sent = sequenced(codec, start, n)
    bad = data.draw(st.integers(0, n - 1))
    stream = b"".join(
        codec.break_checksum(codec.encode(f)) if i == bad else codec.encode(f) for i, f in enumerate(sent)
    )
    frames, d = codec.decode(stream)
    assert not_gaps(frames) == sent[:bad] + sent[bad + 1 :]
    assert d.stats["bad_checksum"] == 1
    assert d.stats["garbage"] == 0
    assert [g.missing for g in gaps(frames)] in ([], [1]), "one frame lost, never more"
    if codec.modulus is not None and 0 < bad < n - 1:
        # a counting sequence proves the loss at once, before the next frame
        # (a loss before the first frame or after the last shows nowhere)
        assert frames[bad : bad + 2] == [SequenceGap(T, sent[bad + 1].seq, sent[bad].seq, 1), sent[bad + 1]]  # type: ignore[arg-type]
    assert_stats_agree(codec, frames, d.stats)


# -- duplicates and the sequence ---------------------------------------------------


@by_codec
@given(n=st.integers(1, 12), start=st.integers(0, 65535), data=st.data())
def test_a_repeat_of_the_last_message_is_dropped_and_counted_as_a_duplicate(
    codec: Codec, n: int, start: int, data: st.DataObject
) -> None:
    sent = sequenced(codec, start, n)
    extra = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    stream = b"".join(codec.encode(f) * (codec.copies + k) for f, k in zip(sent, extra, strict=True))
    frames, d = codec.decode(stream)
    assert frames == sent
    assert d.stats["duplicate"] == sum(codec.copies - 1 + k for k in extra)
    assert_stats_agree(codec, frames, d.stats)


no_restart = st.sampled_from(["ok"] * 30 + ["corrupt"] * 2 + ["malformed"] + ["silent"])


@st.composite
def streams_with_losses(draw: st.DrawFn, codec: Codec) -> list[tuple[float, bytes, bool]]:
    """A device's messages with consecutive seqs (Angel Eye: a random rising
    cycle of characters), each sent as the device sends it at a pace its
    line can carry, then idle for a random while; some lost on the line:
    a bad checksum, refused content, or a run of them not at all. Returns
    ``(t, bytes, lost)`` per message."""
    if codec.modulus is None:
        chars = draw(st.sets(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=2, max_size=20))
        cycle = "".join(sorted(chars)).encode()

        def seq_of(i: int) -> int:
            return cycle[(start + i) % len(cycle)]

        start = draw(st.integers(0, len(cycle) - 1))
    else:
        start = draw(st.integers(0, codec.modulus - 1))

        def seq_of(i: int) -> int:
            return codec.seq_of(start, i)

    t = T
    out: list[tuple[float, bytes, bool]] = []
    silent = 0
    for i in range(draw(st.integers(1, 150))):
        seq = seq_of(i)
        raw = codec.encode(codec.plain(seq, draw(st.integers(0, 51))))
        t += codec.copies * len(raw) * 10 / 4800 + draw(st.sampled_from([0.0] * 6 + [0.001, 0.05, 0.3, 2.0]))
        if silent:
            silent -= 1
            out.append((t, b"", True))
            continue
        how = draw(no_restart) if i else "ok"
        if how == "silent":
            silent = draw(st.integers(0, 40))
            out.append((t, b"", True))
        elif how == "corrupt":
            out.append((t, codec.break_checksum(raw) * codec.copies, True))
        elif how == "malformed":
            out.append((t, codec.malformed(seq) * codec.copies, True))
        else:
            out.append((t, raw * codec.copies, False))
    return out


@by_codec
@given(data=st.data())
def test_a_loss_is_never_overstated_and_an_exact_count_is_the_true_one(
    codec: Codec, data: st.DataObject
) -> None:
    d = codec.new_decoder()
    lost = 0
    yielded: list[Frame] = []
    for t, raw, was_lost in data.draw(streams_with_losses(codec)):
        frames = d.feed(t, raw)
        yielded += frames
        if was_lost:
            lost += 1
            assert frames == []
            continue
        # (Angel Eye: a message equal to the last one accepted, with the
        # same seq, after a loss of whole cycles, is taken for its copy)
        assert len(not_gaps(frames)) == (1 if codec.modulus is not None else len(not_gaps(frames[-1:])))
        found = gaps(frames)
        assert len(found) <= 1
        if found:
            (gap,) = found
            assert frames[0] is gap, "the gap comes before the frame that revealed it"
            assert 1 <= gap.missing <= lost, "a gap the stream does not prove"
            event("exact gap" if gap.exact else "gap of unknown size")
            if gap.exact:
                assert gap.missing == lost, "an exact count that is not the true one"
        elif lost and codec.modulus is not None:
            pytest.fail(f"{lost} frames lost on a counting sequence and no gap reported")
        if codec.modulus is not None and found:
            assert found[0].exact, "a counting sequence knows the size of every gap"
        lost = 0
    assert_stats_agree(codec, yielded, d.stats)


@pytest.mark.parametrize("codec", COUNTING, ids=str)
def test_a_counting_sequence_wraps_without_a_gap_and_counts_a_gap_across_the_wrap(codec: Codec) -> None:
    assert codec.modulus is not None
    top = codec.modulus - 1
    a, b = codec.plain(top, 0), codec.plain(0, 1)
    assert codec.decode(codec.encode(a) + codec.encode(b))[0] == [a, b]
    c, e = codec.plain(top - 1, 0), codec.plain(1, 1)
    assert codec.decode(codec.encode(c) + codec.encode(e))[0] == [c, SequenceGap(T, 1, top, 2), e]


@pytest.mark.parametrize("codec", COUNTING, ids=str)
def test_a_seq_going_backwards_is_a_gap_of_almost_a_full_cycle(codec: Codec) -> None:
    assert codec.modulus is not None
    a, b = codec.plain(17, 0), codec.plain(10, 1)
    assert codec.decode(codec.encode(a) + codec.encode(b))[0][1] == SequenceGap(T, 10, 18, codec.modulus - 8)


@by_codec
def test_a_malformed_frame_does_not_advance_the_sequence_so_its_loss_shows_as_a_gap(codec: Codec) -> None:
    # (Angel Eye counts exactly once it knows the cycle: three laps first,
    # the first opening a lap, two clean ones teaching it)
    head = sequenced(codec, 0, 3 * len(AE_CYCLE) + 1 if codec.modulus is None else 1)
    nxt = len(head)
    after = codec.plain(codec.seq_of(0, nxt + 1), 0)
    stream = b"".join(codec.transmit(f) for f in head)
    stream += codec.malformed(codec.seq_of(0, nxt)) + codec.encode(after)
    frames, d = codec.decode(stream)
    assert frames == [*head, SequenceGap(T, after.seq, codec.seq_of(0, nxt), 1), after]
    assert d.stats["malformed"] == 1
    assert_stats_agree(codec, frames, d.stats)


@by_codec
def test_a_hello_restarts_the_sequence(codec: Codec) -> None:
    hello = dataclasses.replace(data_hello(codec), seq=codec.seq_of(0, 0))
    before = codec.plain(codec.seq_of(0, 7), 0)
    after = codec.plain(codec.seq_of(0, 1), 1)
    frames, d = codec.decode(codec.transmit(before) + codec.transmit(hello) + codec.transmit(after))
    assert frames == [before, hello, after]
    assert d.stats["sequence_gap"] == 0


def data_hello(codec: Codec) -> Hello:
    return Hello(T, 0, "ANGEL-EYE", "", "") if codec.modulus is None else Hello(T, 0, "M", "F", "S")


@by_codec
def test_the_first_frame_and_the_first_after_reset_establish_the_sequence(codec: Codec) -> None:
    d = codec.new_decoder()
    a, b = codec.plain(codec.seq_of(0, 5), 0), codec.plain(codec.seq_of(0, 9), 1)
    assert d.feed(T, codec.encode(a)) == [a]
    d.reset()
    assert d.feed(T, codec.encode(b)) == [b]
    assert d.stats["sequence_gap"] == 0


# -- arbitrary bytes ----------------------------------------------------------------


def assert_only_frames_sent_intact(codec: Codec, frames: list[Frame], data: bytes) -> None:
    for f in not_gaps(frames):
        assert codec.signature(f) in data


@by_codec
@given(data=st.binary(max_size=400))
def test_any_bytes_never_raise_and_yield_only_frames_present_in_the_input(codec: Codec, data: bytes) -> None:
    frames, d = codec.decode(data)
    assert_only_frames_sent_intact(codec, frames, data)
    assert_stats_agree(codec, frames, d.stats)


@st.composite
def noisy_streams(draw: st.DrawFn, codec: Codec) -> bytes:
    """Valid frames (sent as often as the device sends them, or fewer), random
    bytes, cut frames and frames with one byte changed, mixed."""
    parts = []
    for frame in draw(st.lists(any_frame(codec), max_size=8)):
        raw = codec.encode(frame)
        kind = draw(st.sampled_from(["intact", "corrupt", "cut", "noise"]))
        if kind == "corrupt":
            i = draw(st.integers(0, len(raw) - 1))
            raw = raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1 :]  # always a change
        elif kind == "cut":
            raw = raw[: draw(st.integers(0, len(raw) - 1))]
        elif kind == "noise":
            raw = draw(st.binary(max_size=30)) + raw
        parts.append(raw * draw(st.integers(1, codec.copies)))
    return b"".join(parts)


@by_codec
@given(data=st.data())
def test_corrupted_streams_never_yield_a_frame_that_was_not_sent_intact(
    codec: Codec, data: st.DataObject
) -> None:
    stream = data.draw(noisy_streams(codec))
    frames, d = codec.decode(stream)
    assert_only_frames_sent_intact(codec, frames, stream)
    assert_stats_agree(codec, frames, d.stats)
