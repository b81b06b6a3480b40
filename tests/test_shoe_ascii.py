"""shoe-ascii/1 (docs/devices.md, shoe-ascii/1): framing, resynchronisation, drop counts, sequence
gaps, and the encoder, as specifications of what the decoder promises.

What every codec promises (round trips, chunking, garbage, checksums,
duplicates, gaps, arbitrary bytes) is tested once for all three in
``tests/test_codec_contract.py``; this module keeps what only this codec does."""

from __future__ import annotations

from functools import reduce
from operator import xor

import pytest

from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    Frame,
    Hello,
    HostRequest,
    Link,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from firmware_protocols.shoe_ascii import Decoder, Encoder

T = 1763800000.125
enc = Encoder()


def frame_bytes(body: str) -> bytes:
    """A well-formed frame around ``body`` (the part between $ and *)."""
    raw = body.encode("ascii")
    return b"$%s*%02X\r\n" % (raw, reduce(xor, raw, 0))


def decode(data: bytes, t: float = T) -> tuple[list[Frame], Decoder]:
    d = Decoder()
    return d.feed(t, data), d


def decode_char_by_char(data: bytes) -> tuple[list[Frame], Decoder]:
    d = Decoder()
    out: list[Frame] = []
    for i in range(len(data)):
        out += d.feed(T, data[i : i + 1])
    return out, d


QS = frame_bytes("SH,17,CARD,QS")
TD = frame_bytes("SH,18,CARD,TD")
CARD_QS = Card(t=T, seq=17, card="QS")
CARD_TD = Card(t=T, seq=18, card="TD")


# -- the frame format ---------------------------------------------------------


def test_spec_example_card_frame_checksum_is_xor_between_dollar_and_star() -> None:
    assert QS == b"$SH,17,CARD,QS*27\r\n"
    assert enc.encode(CARD_QS) == QS
    assert decode(QS)[0] == [CARD_QS]


def test_every_frame_type_has_its_documented_wire_form() -> None:
    sha = "0123456789abcdef" * 4
    cases: list[tuple[Frame, str]] = [
        (Hello(T, 0, "FAKE-1", "1.0", "000001"), "SH,0,HELLO,FAKE-1,1.0,000001"),
        (Card(T, 1, None), "SH,1,CARD,XX"),
        (Card(T, 1, "TD", face_up=True), "SH,1,CARD,TD,F"),
        (Card(T, 1, "TD", deck=3), "SH,1,CARD,TD,,3"),
        (Card(T, 1, "AC", face_up=True, deck=12), "SH,1,CARD,AC,F,12"),
        (Button(T, 2, "NEWSHOE"), "SH,2,BTN,NEWSHOE"),
        (CutCard(T, 3), "SH,3,CUT"),
        (Status(T, 4, "LID_OPEN"), "SH,4,STAT,LID_OPEN"),
        (Status(T, 4, "JAM", "card stuck at exit"), "SH,4,STAT,JAM,card stuck at exit"),
        (ShuffleCommit(T, 5, "S-0001", 416, sha), f"AS,5,SHUF,S-0001,416,{sha}"),
        (ShuffleOrder(T, 6, 32, ("QS", None, "2H")), "AS,6,ORD,32,QS,XX,2H"),
        (HostRequest(T, 7, "STAT"), "HO,7,REQ,STAT"),
    ]
    for frame, body in cases:
        assert enc.encode(frame) == frame_bytes(body)
        assert decode(frame_bytes(body))[0] == [frame]


def test_decoder_accepts_any_talker() -> None:
    assert decode(frame_bytes("XY9,17,CARD,QS"))[0] == [CARD_QS]


# -- dsmr_parser-style partial frames and garbage ------------------------------


def test_unclosed_frame_is_dropped_as_truncated_when_the_next_frame_starts() -> None:
    frames, d = decode(QS[:-2] + TD)
    assert frames == [CARD_TD]
    assert d.stats["truncated"] == 1
    assert d.stats["garbage"] == 0


def test_garbage_inside_a_frame_breaks_its_checksum() -> None:
    frames, d = decode(QS[:8] + b"zy" + QS[8:] + TD)
    assert frames == [CARD_TD]
    assert d.stats["bad_checksum"] == 1


def test_an_xor_checksum_misses_a_doubled_byte_but_the_content_check_catches_it() -> None:
    frames, d = decode(QS[:8] + b"zz" + QS[8:] + TD)  # "CzzARD": checksum still fits
    assert frames == [CARD_TD]
    assert d.stats["malformed"] == 1


def test_a_dollar_inside_a_frame_truncates_it_and_starts_a_new_one() -> None:
    frames, d = decode(QS[:8] + TD)
    assert frames == [CARD_TD]
    assert d.stats["truncated"] == 1


def test_lower_case_checksum_is_malformed() -> None:
    good = frame_bytes("SH,17,CARD,QS,F")
    assert good.endswith(b"*4D\r\n")
    frames, d = decode(good.replace(b"*4D", b"*4d") + TD)
    assert frames == [CARD_TD]
    assert d.stats["malformed"] == 1


def test_lf_without_cr_is_malformed() -> None:
    frames, d = decode(QS[:-2] + b"\n" + TD)
    assert frames == [CARD_TD]
    assert d.stats["malformed"] == 1


def test_a_120_byte_frame_is_accepted() -> None:
    text = "x" * (120 - len(frame_bytes("SH,17,STAT,JAM,")))
    raw = frame_bytes("SH,17,STAT,JAM," + text)
    assert len(raw) == 120
    assert decode(raw)[0] == [Status(T, 17, "JAM", text)]


def test_over_long_frame_is_dropped_and_the_next_frame_decodes() -> None:
    text = "x" * (121 - len(frame_bytes("SH,17,STAT,JAM,")))
    raw = frame_bytes("SH,17,STAT,JAM," + text)
    assert len(raw) == 121
    frames, d = decode(raw + TD)
    assert frames == [CARD_TD]
    assert d.stats["too_long"] == 1
    assert d.stats["garbage"] == 0


def test_over_long_frame_fed_char_by_char_is_dropped_once_and_its_tail_is_not_garbage() -> None:
    raw = b"$SH,1,STAT,JAM," + b"y" * 300 + b"*00\r\n"
    frames, d = decode_char_by_char(raw + b"junk" + TD)
    assert frames == [CARD_TD]
    assert d.stats == {"too_long": 1, "garbage": 4, "frames": 1}


def test_endless_line_without_dollar_or_lf_does_not_grow_the_buffer() -> None:
    d = Decoder()
    d.feed(T, b"$")
    for _ in range(1000):
        d.feed(T, b"z" * 1000)
    assert d.stats["too_long"] == 1
    assert len(d._buf) == 0
    assert d.feed(T, TD) == [CARD_TD]


# -- strictness: checksummed but not the protocol ------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "SH,017,CARD,QS",  # leading zero
        "SH,+17,CARD,QS",
        "SH,65536,CARD,QS",  # seq out of range
        ",17,CARD,QS",  # empty talker
        "SH,17,CARD,qs",  # lower-case card
        "SH,17,CARD,10S",
        "SH,17,CARD,QS,",  # empty trailing flags
        "SH,17,CARD,QS,X",  # unknown flag
        "SH,17,CARD,QS,F,0",  # deck 0
        "SH,17,CARD,QS,F,13",
        "SH,17,CARD,QS,F,03",
        "SH,17,CARD",
        "SH,17,CARD,QS,F,1,extra",
        "SH,17,BTN,STANDBY",
        "SH,17,CUT,now",
        "SH,17,STAT,FINE",
        "SH,17,STAT,OK,",
        "SH,17,HELLO,a,b",
        "SH,17,SHUF,S1,416," + "A" * 64,  # upper-case hash
        "SH,17,SHUF,S1,416," + "a" * 63,
        "SH,17,ORD,0",
        "SH,17,ORD,0," + ",".join(["QS"] * 17),
        "HO,17,REQ,SHUTDOWN",
        "SH,17,WHAT",
        "SH,17",
        "SH,17,STAT,JAM,tab\there",
    ],
)
def test_checksummed_frames_that_break_the_protocol_are_malformed(body: str) -> None:
    frames, d = decode(frame_bytes(body))
    assert frames == []
    assert d.stats == {"malformed": 1}


def test_non_ascii_bytes_in_a_frame_are_malformed() -> None:
    raw = b"SH,17,STAT,JAM,\xe9"
    frames, d = decode(b"$%s*%02X\r\n" % (raw, reduce(xor, raw, 0)))
    assert frames == []
    assert d.stats == {"malformed": 1}


# -- the sequence --------------------------------------------------------------


def test_hello_with_the_previous_seq_is_a_restart_not_a_duplicate() -> None:
    frames, _ = decode(frame_bytes("SH,0,CARD,QS") + frame_bytes("SH,0,HELLO,M,F,S"))
    assert [type(f) for f in frames] == [Card, Hello]


def test_host_requests_do_not_touch_the_device_sequence() -> None:
    frames, _ = decode(QS + frame_bytes("HO,0,REQ,STAT") + TD)
    assert frames == [CARD_QS, HostRequest(T, 0, "STAT"), CARD_TD]


# -- the encoder ---------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        Hello(T, 0, "a,b", "1", "2"),
        Hello(T, 0, "a*b", "1", "2"),
        Hello(T, 0, "$", "1", "2"),
        Status(T, 0, "JAM", "line\r\nbreak"),
        Status(T, 0, "JAM", "café"),
        Status(T, 0, "BROKEN"),
        Button(T, 0, "STANDBY"),
        Card(T, 0, "QS", hand="P1"),
        Card(T, 0, "QS", game=False),
        Card(T, 0, "QS", deck=13),
        Card(T, 0, "1S"),
        Card(T, None, "QS"),
        Card(T, 65536, "QS"),
        ShuffleOrder(T, 0, 0, ("QS",) * 17),
        ShuffleOrder(T, 0, 0, ()),
        ShuffleCommit(T, 0, "S1", 416, "XYZ"),
        HostRequest(T, 0, "LK02"),
        SequenceGap(T, 0, 1, 1),
        Link(T, None, True),
        Status(T, 0, "JAM", "x" * 120),
    ],
)
def test_encoder_refuses_what_the_protocol_cannot_carry(frame: Frame) -> None:
    with pytest.raises(ValueError):
        enc.encode(frame)


def test_encoder_writes_the_frames_own_seq_so_a_fake_device_can_skip_numbers() -> None:
    assert enc.encode(Card(T, 5, "QS")) == frame_bytes("SH,5,CARD,QS")
    assert enc.encode(Card(T, 5, "QS")) == frame_bytes("SH,5,CARD,QS")  # no hidden counter


# -- feed_many: replay's block decoding ----------------------------------------


def _feed_each(d: Decoder, ts: list[float], datas: list[bytes]) -> list[Frame]:
    out: list[Frame] = []
    for t, data in zip(ts, datas, strict=True):
        out += d.feed(t, data)
    return out


def _same_as_feed(ts: list[float], datas: list[bytes]) -> list[Frame]:
    """feed_many's frames, after checking that they, the counters (with
    their order) and the decoder's state are feed's, read by read."""
    many, each = Decoder(), Decoder()
    got = many.feed_many(ts, datas)
    assert got == _feed_each(each, ts, datas)
    assert list(many.stats.items()) == list(each.stats.items())
    assert (many._seq.last, many._buf, many._skipping) == (each._seq.last, each._buf, each._skipping)
    return got


def test_feed_many_takes_cards_across_the_sequence_wrap() -> None:
    # the inline path predicts no number past 65535: the wrap to 0 is feed's
    frames: list[Frame] = [Hello(T, 65530, "M", "1", "S")]
    frames += [Card(T + i, (65531 + i) % 65536, "AS") for i in range(12)]
    got = _same_as_feed([f.t for f in frames], [enc.encode(f) for f in frames])
    assert [f.seq for f in got] == [65530, 65531, 65532, 65533, 65534, 65535, 0, 1, 2, 3, 4, 5, 6]


def test_feed_many_gives_gaps_duplicates_and_broken_reads_to_feed() -> None:
    cards = [frame_bytes(f"SH,{n},CARD,QS") for n in range(1, 9)]
    datas = [
        frame_bytes("SH,0,HELLO,M,1,S"),
        cards[0],
        cards[0],  # a duplicate
        cards[2],  # a gap of one
        cards[3][:7],  # a read cut short: held in the buffer ...
        cards[3][7:],  # ... and completed
        cards[4],
        frame_bytes("SH,6,CARD,QS,F,3"),  # another shape of card
        frame_bytes("SH,07,CARD,QS"),  # not canonical: malformed
        cards[7].replace(b"QS", b"QH"),  # bad checksum
        cards[7],
        b"garbage",
        frame_bytes("HO,5,REQ,STAT"),  # a host frame: no sequence
        frame_bytes("SH,9,CARD,XX"),  # unread
        frame_bytes("AB,10,CARD,QS"),  # another talker
        frame_bytes("SH,11,BTN,RESULT"),
        frame_bytes("SH,12,BTN,RESULT"),
        frame_bytes("SH,12,BTN,RESULT"),  # a duplicate button
        frame_bytes("SH,14,CUT"),  # after a gap
        frame_bytes("SH,15,HELLO,M,1,S"),
        frame_bytes("SH,16,STAT,OK"),
    ]
    got = _same_as_feed([T + i for i in range(len(datas))], datas)
    assert any(isinstance(f, SequenceGap) for f in got)


def test_feed_many_matches_feed_on_every_single_byte_change() -> None:
    frames: list[Frame] = [Hello(T, 0, "M", "1", "S")]
    frames += [Card(T, n, c) for n, c in enumerate(("QS", "TD", "AH", "QS", "9C"), 1)]
    frames += [Button(T, 6, "RESULT"), Status(T, 7, "JAM", "x"), CutCard(T, 8), Button(T, 9, "RESULT")]
    datas = [enc.encode(f) for f in frames]
    ts = [T] * len(datas)
    _same_as_feed(ts, datas)  # (the shapes met, as in a replay's later blocks)
    for i, raw in enumerate(datas):
        for j in range(len(raw)):
            for b in b"0129$,*\r\nX":
                changed = list(datas)
                changed[i] = raw[:j] + bytes([b]) + raw[j + 1 :]
                _same_as_feed(ts, changed)
