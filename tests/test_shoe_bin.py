"""shoe-bin/1 (docs/devices.md, shoe-bin/1): framing, CRC, resynchronisation on A5 5A, drop
counts, sequence gaps, and the encoder.

What every codec promises (round trips, chunking, garbage, checksums,
duplicates, gaps, arbitrary bytes) is tested once for all three in
``tests/test_codec_contract.py``; this module keeps what only this codec does."""

from __future__ import annotations

import dataclasses
from binascii import crc_hqx

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    Frame,
    Hello,
    HostRequest,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from firmware_protocols.shoe_bin import CARD_OF_BYTE, Decoder, Encoder, crc16_ccitt_false

T = 1763800000.5
enc = Encoder()


def raw_frame(ftype: int, seq: int, payload: bytes, length: int | None = None) -> bytes:
    """A frame with a correct CRC around whatever it is given."""
    body = bytes([len(payload) if length is None else length, ftype]) + seq.to_bytes(2, "little") + payload
    return b"\xa5\x5a" + body + crc_hqx(body, 0xFFFF).to_bytes(2, "little")


def decode(data: bytes, t: float = T) -> tuple[list[Frame], Decoder]:
    d = Decoder()
    return d.feed(t, data), d


QS = raw_frame(0x10, 17, bytes([0 * 13 + 11, 0, 0]))  # queen of spades
TD = raw_frame(0x10, 18, bytes([2 * 13 + 9, 0, 0]))  # ten of diamonds
CARD_QS = Card(T, 17, "QS")
CARD_TD = Card(T, 18, "TD")


# -- the frame format ----------------------------------------------------------


def test_crc_is_ccitt_false_with_its_published_check_value() -> None:
    assert crc16_ccitt_false(b"123456789") == 0x29B1


def test_card_byte_is_suit_times_13_plus_rank_minus_1_with_suits_s_h_d_c() -> None:
    assert CARD_OF_BYTE[0] == "AS"
    assert CARD_OF_BYTE[12] == "KS"
    assert CARD_OF_BYTE[13] == "AH"
    assert CARD_OF_BYTE[2 * 13 + 9] == "TD"
    assert CARD_OF_BYTE[51] == "KC"
    assert CARD_OF_BYTE[0x3F] is None
    assert len(CARD_OF_BYTE) == 53


def test_a_card_frame_has_the_documented_bytes() -> None:
    # marker, len 3, type CARD, seq 17 (LE), QS = 0*13+11, flags 0, deck 0, crc 0x6D32 (LE)
    assert bytes.fromhex("a55a 03 10 1100 0b0000 326d") == QS
    assert enc.encode(CARD_QS) == QS
    assert decode(QS)[0] == [CARD_QS]


def test_every_frame_type_has_its_documented_wire_form() -> None:
    sha = bytes(range(32))
    cases: list[tuple[Frame, bytes]] = [
        (Hello(T, 0, "FAKE-1", "1.0", "000001"), raw_frame(0x01, 0, b"FAKE-1\x001.0\x00000001")),
        (Card(T, 1, None), raw_frame(0x10, 1, b"\x3f\x00\x00")),
        (Card(T, 1, "KC", face_up=True, deck=12), raw_frame(0x10, 1, b"\x33\x01\x0c")),
        (Button(T, 2, "NEWSHOE"), raw_frame(0x20, 2, b"\x01")),
        (Button(T, 2, "RESULT"), raw_frame(0x20, 2, b"\x02")),
        (CutCard(T, 3), raw_frame(0x21, 3, b"")),
        (Status(T, 4, "LOW_POWER"), raw_frame(0x30, 4, b"\x05")),
        (ShuffleCommit(T, 5, "", 416, sha.hex()), raw_frame(0x40, 5, b"\xa0\x01" + sha)),
        (ShuffleOrder(T, 6, 300, ("AS", None)), raw_frame(0x41, 6, b"\x2c\x01\x00\x3f")),
    ]
    for frame, raw in cases:
        assert enc.encode(frame) == raw
        assert decode(raw)[0] == [frame]


def test_descriptive_fields_without_room_on_the_wire_are_left_out() -> None:
    sha = "ab" * 32
    assert decode(enc.encode(ShuffleCommit(T, 5, "S-0001", 416, sha)))[0] == [
        ShuffleCommit(T, 5, "", 416, sha)
    ]
    assert decode(enc.encode(Status(T, 5, "JAM", "stuck")))[0] == [Status(T, 5, "JAM")]


# -- partial frames, garbage and resynchronisation ----------------------------


def test_unclosed_frame_hides_nothing_the_next_frame_is_found_by_resync() -> None:
    frames, d = decode(QS[:-3] + TD)
    assert frames == [CARD_TD]
    assert d.stats["bad_checksum"] == 1
    assert d.stats["garbage"] == 0


def test_garbage_before_after_and_between_frames_is_counted_in_bytes() -> None:
    frames, d = decode(b"\x00\xa5\xa5" + QS + b"\x5a\x5a" + TD + b"\xa5")
    assert frames == [CARD_QS, CARD_TD]
    assert d.stats["garbage"] == 3 + 2
    d.reset()  # the trailing A5 was held back as a possible marker half
    assert d.stats["garbage"] == 6


def test_garbage_inside_a_frame_breaks_its_crc() -> None:
    frames, d = decode(QS[:7] + b"\x00" + QS[7:] + TD)
    assert frames == [CARD_TD]
    assert d.stats["bad_checksum"] == 1


def test_a_corrupted_length_does_not_swallow_the_frames_it_claims() -> None:
    hello = raw_frame(0x01, 16, b"M\x00F\x00S")
    corrupt = hello[:2] + b"\xff" + hello[3:]  # claims 255 payload bytes
    frames, d = decode(corrupt + QS + TD)
    assert frames == [CARD_QS, CARD_TD]  # at once: no wait for the 263 bytes it claims
    assert d.stats == {"malformed": 1, "frames": 2}


def test_a_header_no_frame_can_have_is_refused_without_waiting() -> None:
    frames, d = decode(b"\xa5\x5a\x09\x10" + QS)  # a CARD is never 9 bytes long
    assert frames == [CARD_QS]
    assert d.stats == {"malformed": 1, "frames": 1}


def test_unknown_type_is_malformed() -> None:
    frames, d = decode(raw_frame(0x77, 17, b"") + TD)
    assert frames == [CARD_TD]
    assert d.stats["malformed"] == 1


@pytest.mark.parametrize(
    ("ftype", "payload"),
    [
        (0x10, b"\x34\x00\x00"),  # card byte 52
        (0x10, b"\x40\x00\x00"),
        (0x10, b"\x0b\x02\x00"),  # reserved flag bit
        (0x10, b"\x0b\x00\x0d"),  # deck 13
        (0x20, b"\x03"),
        (0x20, b"\x00"),
        (0x30, b"\x06"),
        (0x01, b"model\x00firmware"),
        (0x01, b"a\x00b\x00c\x00d"),
        (0x01, b"caf\xe9\x00b\x00c"),
        (0x01, b"tab\t\x00b\x00c"),
        (0x41, b"\x00\x00\x0b\x35"),
    ],
)
def test_crc_valid_frames_that_break_the_protocol_are_malformed(ftype: int, payload: bytes) -> None:
    frames, d = decode(raw_frame(ftype, 17, payload))
    assert frames == []
    assert d.stats == {"malformed": 1}


# -- the encoder ---------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        Hello(T, 0, "a\0b", "1", "2"),
        Hello(T, 0, "café", "1", "2"),
        Hello(T, 0, "m" * 200, "f" * 30, "s" * 30),
        Card(T, 0, "QS", hand="B2"),
        Card(T, 0, "QS", game=False),
        Card(T, 0, "QS", deck=0),
        Card(T, 0, "ZZ"),
        Card(T, None, "QS"),
        Card(T, 70000, "QS"),
        Button(T, 0, "REDEAL"),
        Status(T, 0, "LOCKED"),
        ShuffleCommit(T, 0, "", 416, "AB" * 32),
        ShuffleCommit(T, 0, "", 70000, "ab" * 32),
        ShuffleOrder(T, 0, 0, ()),
        ShuffleOrder(T, 0, 0, ("QS",) * 254),
        HostRequest(T, 0, "STAT"),
        SequenceGap(T, 0, 1, 1),
    ],
)
def test_encoder_refuses_what_the_protocol_cannot_carry(frame: Frame) -> None:
    with pytest.raises(ValueError):
        enc.encode(frame)


# -- properties ----------------------------------------------------------------

commits = st.builds(
    ShuffleCommit,
    st.just(T),
    st.integers(0, 65535),
    st.just(""),
    st.integers(0, 65535),
    st.binary(min_size=32, max_size=32).map(bytes.hex),
)


@given(commits, st.text(max_size=5))
def test_shoe_id_is_the_only_thing_a_shuffle_commit_loses(frame: ShuffleCommit, shoe_id: str) -> None:
    raw = enc.encode(dataclasses.replace(frame, shoe_id=shoe_id))
    assert raw == enc.encode(frame)
    assert decode(raw)[0] == [frame]
