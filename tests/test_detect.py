"""Protocol autodetection from a device's first bytes, and the registry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import ALL_CARDS
from firmware_protocols import angel_eye, shoe_ascii, shoe_bin
from firmware_protocols.detect import PROTOCOLS, detect, make_decoder, make_encoder
from firmware_protocols.frames import Ack, Button, Card, CutCard, Frame, Hello

T = 1.0


def ascii_frames(*frames: Frame) -> bytes:
    return b"".join(shoe_ascii.Encoder().encode(f) for f in frames)


def bin_frames(*frames: Frame) -> bytes:
    return b"".join(shoe_bin.Encoder().encode(f) for f in frames)


def angel_frames(*frames: Frame) -> bytes:
    return b"".join(angel_eye.Encoder().encode_repeated(f) for f in frames)


def test_registry_names_the_three_protocols_of_the_spec() -> None:
    assert set(PROTOCOLS) == {"shoe-ascii/1", "shoe-bin/1", "angel-eye/2"}
    assert PROTOCOLS["shoe-bin/1"] == (shoe_bin.Decoder, shoe_bin.Encoder)


@pytest.mark.parametrize("name", ["shoe-ascii/1", "shoe-bin/1", "angel-eye/2"])
def test_make_decoder_and_encoder_build_a_working_pair(name: str) -> None:
    frame = Button(T, 7, "STANDBY" if name == "angel-eye/2" else "RESULT")
    assert make_decoder(name).feed(T, make_encoder(name).encode(frame)) == [frame]


def test_an_unknown_protocol_name_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown protocol 'nmea/0'.*shoe-ascii/1, shoe-bin/1, angel-eye/2"):
        make_decoder("nmea/0")
    with pytest.raises(ValueError, match="known protocols"):
        make_encoder("")


def test_detects_each_protocol_from_one_frame() -> None:
    assert detect(ascii_frames(Card(T, 3, "QS"))) == "shoe-ascii/1"
    assert detect(bin_frames(Card(T, 3, "QS"))) == "shoe-bin/1"
    assert detect(angel_frames(Card(T, 3, "QS", hand="P1"))) == "angel-eye/2"


def test_detects_from_a_read_that_starts_and_ends_mid_frame() -> None:
    stream = ascii_frames(Hello(T, 0, "M", "F", "S"), Card(T, 1, "QS"), CutCard(T, 2))
    assert detect(stream[9:-4]) == "shoe-ascii/1"
    bstream = bin_frames(Hello(T, 0, "M", "F", "S"), Card(T, 1, "QS"), CutCard(T, 2))
    assert detect(bstream[5:-3]) == "shoe-bin/1"


def test_no_complete_frame_detects_nothing() -> None:
    assert detect(b"") is None
    assert detect(ascii_frames(Card(T, 3, "QS"))[:-1]) is None
    assert detect(bytes(range(256)) * 4) is None


def test_a_bad_checksum_detects_nothing() -> None:
    assert detect(ascii_frames(Card(T, 3, "QS")).replace(b"QS", b"KS")) is None


def test_acks_alone_prove_nothing() -> None:
    assert detect(b"\x06\x06\x06") is None
    assert detect(angel_eye.Encoder().encode(Ack(T, None, True))) is None


def test_a_mixture_of_two_protocols_is_ambiguous() -> None:
    assert detect(ascii_frames(Card(T, 3, "QS")) + bin_frames(Card(T, 4, "QS"))) is None


seqs = st.integers(0, 255)
cards = st.sampled_from(ALL_CARDS)
hands = st.sampled_from(["P1", "P2", "P3", "B1", "B2", "B3", "burn"])


@given(
    st.lists(st.builds(lambda s, c: Card(T, s, c), seqs, cards), min_size=1, max_size=6),
    st.binary(max_size=20),
)
def test_any_shoe_ascii_stream_is_detected_as_such(frames: list[Frame], noise: bytes) -> None:
    assert detect(noise.replace(b"$", b"") + ascii_frames(*frames)) == "shoe-ascii/1"


@given(
    st.lists(st.builds(lambda s, c: Card(T, s, c), seqs, cards), min_size=1, max_size=6),
    st.binary(max_size=20),
)
def test_any_shoe_bin_stream_is_detected_as_such(frames: list[Frame], noise: bytes) -> None:
    assert detect(noise.replace(b"\xa5", b"") + bin_frames(*frames)) == "shoe-bin/1"


@given(st.lists(st.builds(lambda s, c, h: Card(T, s, c, hand=h), seqs, cards, hands), min_size=1, max_size=6))
def test_any_angel_eye_stream_is_detected_as_such(frames: list[Frame]) -> None:
    assert detect(angel_frames(*frames)) == "angel-eye/2"
