"""``shoe-bin/1``: the binary protocol of USB card-reading shoes (bulk or
HID endpoints, read through pyusb). Sans-IO: bytes in, frames out.

Wire format (docs/devices.md, copied here so the code stands alone)::

    A5 5A | len:u8 | type:u8 | seq:u16le | payload[len] | crc:u16le

``crc`` is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection,
xorout 0; check value 0x29B1 for ``b"123456789"``) over ``len`` through the
end of the payload. ``seq`` is +1 per frame, wraps 65535 -> 0; HELLO (device
reset) restarts it.

Card byte: ``suit*13 + (rank-1)``, suits S=0 H=1 D=2 C=3, ranks A=1..K=13;
``0x3F`` = passed the reader unread.

===== ============== =====================================================
type  frame          payload
===== ============== =====================================================
0x01  Hello          ASCII ``model \\0 firmware \\0 serial``
0x10  Card           card, flags (bit0 = face up), deck (0 = unknown, 1-12)
0x20  Button         1 = NEWSHOE, 2 = RESULT
0x21  CutCard        (none)
0x30  Status         0 OK, 1 JAM, 2 EMPTY, 3 LID_OPEN, 4 READER_FAULT,
                     5 LOW_POWER
0x40  ShuffleCommit  ncards:u16le + 32-byte SHA-256 (no shoe id: decoded
                     as ``""``)
0x41  ShuffleOrder   index:u16le + one card byte per card
===== ============== =====================================================

After any bad frame the decoder resynchronises on the next ``A5 5A`` after
that frame's marker, so a frame with a corrupted length byte does not hide
the good frames it claimed. A header that cannot be right (unknown type, or
a length the type never has), or a HELLO / SHUFFLE_ORDER whose payload
holds an ``A5`` (which neither ever contains), is refused at once, without
waiting for the bytes it claims. As in ``shoe-ascii/1``, the decoder is strict (reserved
flag bits, unknown codes and out-of-range values are ``malformed``) and a
malformed frame does not advance the sequence, so its loss shows as a
:class:`SequenceGap`.

``Decoder.stats`` reasons: ``garbage`` (bytes outside any frame, counted in
bytes; the bytes a bad frame claimed are not garbage), ``bad_checksum``,
``malformed``, ``duplicate``, ``truncated`` (partial frame dropped by
:meth:`Decoder.reset`), ``sequence_gap`` and ``frames``.
"""

from __future__ import annotations

import collections
from binascii import crc_hqx
from collections.abc import Callable

from firmware_protocols.cards import RANKS
from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    Frame,
    Hello,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from firmware_protocols.framing import Malformed as _Malformed
from firmware_protocols.framing import SequenceTracker

NAME = "shoe-bin/1"
MARKER = b"\xa5\x5a"
HEADER = 6  # marker, len, type, seq
OVERHEAD = HEADER + 2  # + crc
SEQ_MODULUS = 65536

T_HELLO = 0x01
T_CARD = 0x10
T_BUTTON = 0x20
T_CUT = 0x21
T_STATUS = 0x30
T_SHUFFLE_COMMIT = 0x40
T_SHUFFLE_ORDER = 0x41

UNREAD_BYTE = 0x3F
_BIN_SUITS = "SHDC"  # wire order S=0 H=1 D=2 C=3
CARD_OF_BYTE: dict[int, str | None] = {
    s * 13 + r: RANKS[r] + suit for s, suit in enumerate(_BIN_SUITS) for r in range(13)
}
CARD_OF_BYTE[UNREAD_BYTE] = None
BYTE_OF_CARD: dict[str | None, int] = {c: b for b, c in CARD_OF_BYTE.items()}

BUTTON_CODES: dict[int, str] = {1: "NEWSHOE", 2: "RESULT"}
STATUS_CODES: dict[int, str] = {
    0: "OK",
    1: "JAM",
    2: "EMPTY",
    3: "LID_OPEN",
    4: "READER_FAULT",
    5: "LOW_POWER",
}
_BUTTON_BYTE = {v: k for k, v in BUTTON_CODES.items()}
_STATUS_BYTE = {v: k for k, v in STATUS_CODES.items()}

# Payload length each type may have: a fixed size, or a minimum.
_FIXED_LEN = {T_CARD: 3, T_BUTTON: 1, T_CUT: 0, T_STATUS: 1, T_SHUFFLE_COMMIT: 34}
_MIN_LEN = {T_HELLO: 2, T_SHUFFLE_ORDER: 3}
# Variable-length payloads that can never contain 0xA5 (printable ASCII and
# NUL; card bytes <= 0x3F), from this offset in the frame on.
_A5_FREE_FROM = {T_HELLO: HEADER, T_SHUFFLE_ORDER: HEADER + 2}


def crc16_ccitt_false(data: bytes) -> int:
    """CRC-16/CCITT-FALSE; ``binascii.crc_hqx`` is exactly this CRC with
    the initial value passed in."""
    return crc_hqx(data, 0xFFFF)


def _header_possible(length: int, ftype: int) -> bool:
    fixed = _FIXED_LEN.get(ftype)
    if fixed is not None:
        return length == fixed
    minimum = _MIN_LEN.get(ftype)
    return minimum is not None and length >= minimum


# The same, as a table indexed by ``type << 8 | len`` for the hot loop.
_HEADER_OK = bytes(_header_possible(i & 0xFF, i >> 8) for i in range(65536))


def _ascii(raw: bytes) -> str:
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise _Malformed from None
    if not text.isprintable():
        raise _Malformed
    return text


def _card(b: int) -> str | None:
    try:
        return CARD_OF_BYTE[b]
    except KeyError:
        raise _Malformed from None


def _parse_hello(t: float, seq: int, p: bytes) -> Frame:
    parts = p.split(b"\0")
    if len(parts) != 3:
        raise _Malformed
    return Hello(t=t, seq=seq, model=_ascii(parts[0]), firmware=_ascii(parts[1]), serial=_ascii(parts[2]))


def _parse_card(t: float, seq: int, p: bytes) -> Frame:
    flags, deck = p[1], p[2]
    if flags > 1 or deck > 12:  # reserved flag bits must be clear in version 1
        raise _Malformed
    return Card(t, seq, _card(p[0]), flags == 1, deck or None)  # positional: the hot path


def _parse_button(t: float, seq: int, p: bytes) -> Frame:
    name = BUTTON_CODES.get(p[0])
    if name is None:
        raise _Malformed
    return Button(t=t, seq=seq, name=name)


def _parse_cut(t: float, seq: int, p: bytes) -> Frame:
    return CutCard(t=t, seq=seq)


def _parse_status(t: float, seq: int, p: bytes) -> Frame:
    code = STATUS_CODES.get(p[0])
    if code is None:
        raise _Malformed
    return Status(t=t, seq=seq, code=code)


def _parse_shuffle_commit(t: float, seq: int, p: bytes) -> Frame:
    return ShuffleCommit(t=t, seq=seq, shoe_id="", ncards=p[0] | p[1] << 8, sha256=p[2:].hex())


def _parse_shuffle_order(t: float, seq: int, p: bytes) -> Frame:
    return ShuffleOrder(t=t, seq=seq, index=p[0] | p[1] << 8, cards=tuple(_card(b) for b in p[2:]))


_PARSERS: dict[int, Callable[[float, int, bytes], Frame]] = {
    T_HELLO: _parse_hello,
    T_CARD: _parse_card,
    T_BUTTON: _parse_button,
    T_CUT: _parse_cut,
    T_STATUS: _parse_status,
    T_SHUFFLE_COMMIT: _parse_shuffle_commit,
    T_SHUFFLE_ORDER: _parse_shuffle_order,
}


class Decoder:
    """Bytes in, frames out; resynchronises on the next ``A5 5A`` after
    anything it cannot use, and counts what it dropped in :attr:`stats`."""

    def __init__(self) -> None:
        self.stats: collections.Counter[str] = collections.Counter()
        self._seq = SequenceTracker(SEQ_MODULUS)
        self._buf = b""
        # Bytes still claimed by the last bad frame: skipped while
        # resynchronising, but not garbage.
        self._claimed = 0

    def reset(self) -> None:
        """Forget the partial frame and the sequence (a new connection)."""
        if self._buf.startswith(MARKER):
            self.stats["truncated"] += 1
        elif self._buf:
            self.stats["garbage"] += len(self._buf)
        self._buf = b""
        self._claimed = 0
        self._seq.reset()

    def _skip(self, nbytes: int) -> None:
        claimed = min(self._claimed, nbytes)
        self._claimed -= claimed
        if nbytes > claimed:
            self.stats["garbage"] += nbytes - claimed

    def feed(self, t: float, data: bytes) -> list[Frame]:
        """Decode a chunk read at ``t``; returns the frames it completed,
        each stamped with ``t``."""
        out: list[Frame] = []
        buf = self._buf + data if self._buf else bytes(data)
        n = len(buf)
        pos = 0
        stats = self.stats
        header_ok = _HEADER_OK
        while True:
            start = buf.find(MARKER, pos)
            if start < 0:
                # Keep a trailing A5: it may be the first half of a marker.
                keep = 1 if n > pos and buf[n - 1] == 0xA5 else 0
                self._skip(n - keep - pos)
                pos = n - keep
                break
            if start > pos:
                self._skip(start - pos)
            pos = start
            if n - start < 4:
                break  # wait for the length and type
            length = buf[start + 2]
            ftype = buf[start + 3]
            if not header_ok[ftype << 8 | length]:
                stats["malformed"] += 1
                self._claimed = length + OVERHEAD - 2
                pos = start + 2
                continue
            end = start + length + OVERHEAD
            body_from = _A5_FREE_FROM.get(ftype)
            if body_from is not None and buf.find(b"\xa5", start + body_from, min(n, end - 2)) >= 0:
                # A payload that can hold no A5 holds one: its length byte
                # lied, and a new frame starts there. Refusing it now (not
                # when its claimed bytes are in) keeps the frames it
                # swallowed from being delayed.
                stats["malformed"] += 1
                self._claimed = length + OVERHEAD - 2
                pos = start + 2
                continue
            if end > n:
                break  # wait for the rest of the frame
            crc = buf[end - 2] | buf[end - 1] << 8
            if crc_hqx(buf[start + 2 : end - 2], 0xFFFF) != crc:
                stats["bad_checksum"] += 1
                self._claimed = length + OVERHEAD - 2
                pos = start + 2
                continue
            seq = buf[start + 4] | buf[start + 5] << 8
            try:
                frame = _PARSERS[ftype](t, seq, buf[start + HEADER : end - 2])
            except _Malformed:
                stats["malformed"] += 1
                self._claimed = 0
                pos = end
                continue
            self._claimed = 0
            pos = end
            tracker = self._seq
            is_hello = ftype == T_HELLO
            if seq == tracker.last and not is_hello:
                stats["duplicate"] += 1
                continue
            gap = tracker.advance(t, seq, restart=is_hello)
            if gap is not None:
                stats["sequence_gap"] += 1
                out.append(gap)
            stats["frames"] += 1
            out.append(frame)
        self._buf = buf[pos:] if pos < n else b""
        return out


def _ascii_field(value: str, what: str) -> bytes:
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"{NAME} cannot carry {what}={value!r}: printable ASCII only")
    return value.encode("ascii")


def _card_byte(card: str | None) -> int:
    try:
        return BYTE_OF_CARD[card]
    except KeyError:
        raise ValueError(f"{NAME}: not a card code: {card!r}") from None


def _u16(value: int, what: str) -> bytes:
    if not 0 <= value <= 0xFFFF:
        raise ValueError(f"{NAME}: {what} must fit in 16 bits, not {value!r}")
    return value.to_bytes(2, "little")


class Encoder:
    """Frame in, bytes out. Stateless: each frame's own ``seq`` is written.

    Fields the wire format has no room for are refused (ValueError) when
    they change what a frame means (a card's hand, a non-game card, a
    status code or button the protocol lacks), and left out when they are
    only descriptive: ``ShuffleCommit.shoe_id`` and ``Status.text``.
    """

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, Hello):
            ftype = T_HELLO
            payload = b"\0".join(
                [
                    _ascii_field(frame.model, "model"),
                    _ascii_field(frame.firmware, "firmware"),
                    _ascii_field(frame.serial, "serial"),
                ]
            )
        elif isinstance(frame, Card):
            if frame.hand is not None or not frame.game:
                raise ValueError(f"{NAME} cannot carry a card's hand or a non-game card: {frame!r}")
            deck = frame.deck or 0
            if frame.deck is not None and not 1 <= frame.deck <= 12:
                raise ValueError(f"{NAME}: deck must be 1-12, not {frame.deck!r}")
            ftype = T_CARD
            payload = bytes([_card_byte(frame.card), 1 if frame.face_up else 0, deck])
        elif isinstance(frame, Button):
            code = _BUTTON_BYTE.get(frame.name)
            if code is None:
                raise ValueError(f"{NAME} has no button {frame.name!r} (only {sorted(_BUTTON_BYTE)})")
            ftype = T_BUTTON
            payload = bytes([code])
        elif isinstance(frame, CutCard):
            ftype = T_CUT
            payload = b""
        elif isinstance(frame, Status):
            code = _STATUS_BYTE.get(frame.code)
            if code is None:
                raise ValueError(f"{NAME} has no status {frame.code!r} (only {sorted(_STATUS_BYTE)})")
            ftype = T_STATUS
            payload = bytes([code])
        elif isinstance(frame, ShuffleCommit):
            try:
                digest = bytes.fromhex(frame.sha256)
            except ValueError:
                digest = b""
            if len(digest) != 32 or frame.sha256 != digest.hex():
                raise ValueError(f"{NAME}: sha256 must be 64 lower-case hex digits, not {frame.sha256!r}")
            ftype = T_SHUFFLE_COMMIT
            payload = _u16(frame.ncards, "ncards") + digest
        elif isinstance(frame, ShuffleOrder):
            if not frame.cards:
                raise ValueError(f"{NAME}: SHUFFLE_ORDER needs at least one card")
            ftype = T_SHUFFLE_ORDER
            payload = _u16(frame.index, "index") + bytes(_card_byte(c) for c in frame.cards)
        else:
            raise ValueError(f"{NAME} cannot carry {type(frame).__name__} frames")
        if len(payload) > 255:
            raise ValueError(f"{NAME}: payload of {len(payload)} bytes does not fit the u8 length")
        if frame.seq is None:
            raise ValueError(f"{NAME} frames carry a seq 0-65535, not None")
        body = bytes([len(payload), ftype]) + _u16(frame.seq, "seq") + payload
        return MARKER + body + crc_hqx(body, 0xFFFF).to_bytes(2, "little")
