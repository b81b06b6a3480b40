"""``shoe-ascii/1``: the line protocol of card-reading shoes and shufflers
(RS-232 / USB-CDC, 9600-115200 8N1). Sans-IO: bytes in, frames out.

Wire format (docs/devices.md, copied here so the code stands alone)::

    $<talker>,<seq>,<type>[,<field>]...*<ck>\\r\\n

- ``talker``: ``SH`` card-reading shoe, ``AS`` automatic shuffler (SHUF,
  ORD), ``HO`` host (REQ). The decoder accepts any non-empty talker.
- ``seq``: decimal u16, +1 per device frame, wraps 65535 -> 0; HELLO
  (device reset) restarts it.
- ``ck``: two upper-case hex digits, XOR of every byte between ``$`` and ``*``.
- A frame is at most 120 bytes including ``$`` and CRLF; CRLF is required.

===== =============================== =====================================
type  fields                          frame
===== =============================== =====================================
HELLO model, firmware, serial         Hello
CARD  card[, flags[, deck]]           Card (``XX`` = unread, flag ``F`` =
                                      face up, deck 1-12)
BTN   NEWSHOE | RESULT                Button
CUT                                   CutCard
STAT  code[, text]                    Status (OK JAM EMPTY LID_OPEN
                                      READER_FAULT LOW_POWER)
SHUF  shoe_id, ncards, sha256         ShuffleCommit (sha256 lower-case hex)
ORD   index, card, card, ...          ShuffleOrder (1 to 16 cards)
REQ   STAT | HELLO                    HostRequest (host -> device)
===== =============================== =====================================

The decoder is strict: it accepts exactly the byte strings the encoder
produces (apart from the talker), so a frame it yields always re-encodes to
the bytes it came from. A frame whose checksum verified but whose content
breaks the protocol (unknown type, unknown flag letter, bad card code,
leading zeros, empty trailing field, non-printable byte...) is dropped as
``malformed`` and does *not* advance the sequence: the next good frame then
reports the loss as a :class:`SequenceGap`, so the engine never deals on
past a frame it could not read.

``Decoder.stats`` counts, by reason: ``garbage`` (bytes outside any frame),
``truncated`` (a frame cut short by the next ``$``, or pending at
:meth:`Decoder.reset`), ``too_long``, ``bad_checksum``, ``malformed``,
``duplicate`` (same seq as the previous frame), ``sequence_gap`` and
``frames`` (frames decoded, synthesised gaps not included). Every reason but
``garbage`` counts frames; ``garbage`` counts bytes.

Sequence tracking covers device frames only; host frames (REQ, seen when a
capture's ``>`` lines are decoded) pass through without touching it.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable
from typing import Any

from firmware_protocols.cards import ALL_CARDS
from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    Frame,
    Hello,
    HostRequest,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from firmware_protocols.framing import CARD_SETTERS, SequenceTracker, new_card, xor8
from firmware_protocols.framing import Malformed as _Malformed

NAME = "shoe-ascii/1"
MAX_FRAME = 120  # bytes, including "$" and CRLF
MAX_ORDER_CARDS = 16
SEQ_MODULUS = 65536

BUTTONS = frozenset({"NEWSHOE", "RESULT"})
STATUS_CODES = frozenset({"OK", "JAM", "EMPTY", "LID_OPEN", "READER_FAULT", "LOW_POWER"})
REQUESTS = frozenset({"STAT", "HELLO"})
UNREAD = "XX"
_CARDS = frozenset(ALL_CARDS)
_HEX_LOWER = frozenset("0123456789abcdef")
# The checksum digits, strictly upper case: int(x, 16) would also take " f" or "+F".
_CK_VALUE: dict[bytes, int] = {f"{i:02X}".encode(): i for i in range(256)}
# ... and with the CRLF that ends a frame
_CK_CRLF: dict[bytes, int] = {k + b"\r\n": v for k, v in _CK_VALUE.items()}
_FORBIDDEN = frozenset(",*$\r\n")
# A frame with nothing wrong in its framing: printable ASCII but "$" and "*"
# between them, at most 120 bytes. Anything else takes the careful path,
# which classifies what is wrong; both reach the same verdict on this form.
_CLEAN_FRAME = re.compile(rb"\$([\x20-\x23\x25-\x29\x2b-\x7e]{0,114})\*([0-9A-F]{2})\r\n")
#: The XOR of the digits of each sequence number, filled as met (0xFF: not
#: yet; an XOR of ASCII digits is at most 0x3F).
_SEQ_XOR = bytearray(b"\xff" * SEQ_MODULUS)
#: How many frame shapes a decoder remembers (see ``Decoder._shape``): a
#: shape with each of its checksums (a card's 52 codes with a sequence
#: number's 32 possible XORs are 1,664), and without them.
MAX_KNOWN = 4096
_CT, _CS, _CC, _CF, _CD, _CH, _CG = CARD_SETTERS
_new = object.__new__
#: Frame shapes met by any decoder (see ``Decoder._shape``), at most
#: MAX_KNOWN of each: memos of what the bytes alone decide (no t, no seq,
#: no decoder state), so they change no result; kept here, not in a decoder,
#: so that a decoder restored from a checkpoint (its saved fields only) has
#: them too.
_KNOWN: dict[bytes, tuple[Any, ...]] = {}
_BASES: dict[bytes, tuple[Any, ...]] = {}
_CARD_FRAME = 0  # a remembered shape's kind: a Card ...
_DEVICE_FRAME = 1  # ... another frame that advances the sequence ...
_HELLO_FRAME = 2  # ... a HELLO, which restarts it ...
_HOST_FRAME = 3  # ... or a host frame, which does not touch it


def _uint(text: str, maximum: int) -> int:
    # Canonical decimal only: "07", "+7", " 7" and "7_0" are all refused
    # (text is ASCII already, so isdigit means 0-9).
    if not text.isdigit() or (text[0] == "0" and len(text) > 1):
        raise _Malformed
    value = int(text)
    if value > maximum:
        raise _Malformed
    return value


def _card(text: str) -> str | None:
    if text == UNREAD:
        return None
    if text not in _CARDS:
        raise _Malformed
    return text


def _parse_hello(t: float, seq: int, f: list[str]) -> Frame:
    if len(f) != 3:
        raise _Malformed
    return Hello(t=t, seq=seq, model=f[0], firmware=f[1], serial=f[2])


def _parse_card(t: float, seq: int, f: list[str]) -> Frame:
    if len(f) == 1:  # the common case: positional construction is the cheapest
        return Card(t, seq, _card(f[0]))
    if not 2 <= len(f) <= 3:
        raise _Malformed
    card = _card(f[0])
    face_up = False
    deck = None
    # Only "F" is defined; an unknown flag might mean something about this
    # very card, so it is refused rather than ignored. An empty flags field
    # is only canonical when a deck follows.
    if f[1] == "F":
        face_up = True
    elif f[1] != "" or len(f) == 2:
        raise _Malformed
    if len(f) == 3:
        deck = _uint(f[2], 12)
        if deck == 0:
            raise _Malformed
    return Card(t, seq, card, face_up, deck)


def _parse_button(t: float, seq: int, f: list[str]) -> Frame:
    if len(f) != 1 or f[0] not in BUTTONS:
        raise _Malformed
    return Button(t=t, seq=seq, name=f[0])


def _parse_cut(t: float, seq: int, f: list[str]) -> Frame:
    if f:
        raise _Malformed
    return CutCard(t=t, seq=seq)


def _parse_status(t: float, seq: int, f: list[str]) -> Frame:
    if not 1 <= len(f) <= 2 or f[0] not in STATUS_CODES:
        raise _Malformed
    if len(f) == 2 and f[1] == "":
        raise _Malformed
    return Status(t=t, seq=seq, code=f[0], text=f[1] if len(f) == 2 else "")


def _parse_shuffle_commit(t: float, seq: int, f: list[str]) -> Frame:
    if len(f) != 3 or len(f[2]) != 64 or not set(f[2]) <= _HEX_LOWER:
        raise _Malformed
    return ShuffleCommit(t=t, seq=seq, shoe_id=f[0], ncards=_uint(f[1], 65535), sha256=f[2])


def _parse_shuffle_order(t: float, seq: int, f: list[str]) -> Frame:
    if not 2 <= len(f) <= MAX_ORDER_CARDS + 1:
        raise _Malformed
    return ShuffleOrder(t=t, seq=seq, index=_uint(f[0], 65535), cards=tuple(_card(c) for c in f[1:]))


def _parse_request(t: float, seq: int, f: list[str]) -> Frame:
    if len(f) != 1 or f[0] not in REQUESTS:
        raise _Malformed
    return HostRequest(t=t, seq=seq, what=f[0])


_PARSERS: dict[str, Callable[[float, int, list[str]], Frame]] = {
    "HELLO": _parse_hello,
    "CARD": _parse_card,
    "BTN": _parse_button,
    "CUT": _parse_cut,
    "STAT": _parse_status,
    "SHUF": _parse_shuffle_commit,
    "ORD": _parse_shuffle_order,
    "REQ": _parse_request,
}


class Decoder:
    """Bytes in, frames out; resynchronises on the next ``$`` after anything
    it cannot use, and counts what it dropped in :attr:`stats`."""

    def __init__(self) -> None:
        self.stats: collections.Counter[str] = collections.Counter()
        self._seq = SequenceTracker(SEQ_MODULUS)
        self._buf = b""
        # Inside the tail of an over-long frame: its bytes up to the next
        # "$" or LF belong to that frame, not to the garbage count.
        self._skipping = False

    def reset(self) -> None:
        """Forget the partial frame and the sequence (a new connection)."""
        if self._buf:
            self.stats["truncated"] += 1
        self._buf = b""
        self._skipping = False
        self._seq.reset()

    def feed(self, t: float, data: bytes) -> list[Frame]:
        """Decode a chunk read at ``t``; returns the frames it completed,
        each stamped with ``t``."""
        # The common read: exactly one frame, of a shape met before: the
        # same bytes but for the sequence number (see _shape). The number
        # is checked here as the general path checks it (canonical decimal
        # below 65536, making the checksum right, the frame at most
        # MAX_FRAME bytes), and the sequence tracked as _decode_body tracks
        # it. Anything else takes the general path.
        if type(data) is bytes and not self._buf and not self._skipping:
            try:
                talker, seq_b, rest = data.split(b",", 2)
            except ValueError:  # not three fields
                return self._feed(t, data)
            shape = _KNOWN.get(rest) or self._shape(t, data, talker, seq_b, rest)
            if (
                shape is not None
                and shape[0] == talker
                and seq_b.isdigit()
                and (seq_b[0] != 0x30 or len(seq_b) == 1)
                and len(data) <= MAX_FRAME
            ):
                seq = int(seq_b)
                if seq < SEQ_MODULUS:
                    sx = _SEQ_XOR[seq]
                    if sx == 0xFF:
                        sx = _SEQ_XOR[seq] = xor8(seq_b)
                    if sx == shape[1]:
                        if shape[2] == _CARD_FRAME:  # the hot path, inline
                            tracker = self._seq
                            last = tracker.last
                            if last is not None and seq != last + 1:
                                return self._one(t, seq, shape)  # a duplicate or a gap
                            tracker.last = seq
                            self.stats["frames"] += 1
                            # Card(t, seq, ...) at half the cost (see
                            # framing.new_card), inline: once per card
                            card = _new(Card)
                            _CT(card, t)
                            _CS(card, seq)
                            _CC(card, shape[5])
                            _CF(card, shape[6])
                            _CD(card, shape[7])
                            _CH(card, None)
                            _CG(card, True)
                            return [card]
                        return self._one(t, seq, shape)
        return self._feed(t, data)

    def feed_many(self, ts: list[float], datas: list[bytes]) -> list[Frame]:
        """``feed(ts[i], datas[i])`` for each i in turn, the frames in one
        list: the same frames, stats and state. For replay, which decodes a
        block of reads at a time.

        Inline here, the common read of :meth:`feed`'s hot path when its
        number is the one after the last: a card (or another device frame
        but HELLO: a button, a status...) of a known shape whose sequence
        digits are exactly those of the last number + 1 (so
        canonical and below 65536: the next is not predicted past 65535)
        and whose checksum they make right. The sequence and the frame
        count are kept in locals and written back before anything else
        is given to :meth:`feed` (and at the end): the same state and the
        same counts, in the same order, as read by read."""
        out: list[Frame] = []
        add = out.append
        known = _KNOWN.get
        seq_xor = _SEQ_XOR
        tracker = self._seq
        stats = self.stats
        new, ct, cs, cc, cf, cd, ch, cg = _new, _CT, _CS, _CC, _CF, _CD, _CH, _CG
        card_frame, device_frame = _CARD_FRAME, _DEVICE_FRAME
        # the number after the last (None: none predicted), its digits
        nxt, nxt_b = _next_seq(tracker.last)
        clean = not self._buf and not self._skipping
        n = 0  # cards taken here, not yet in stats
        for t, data in zip(ts, datas, strict=True):
            if clean and type(data) is bytes:
                parts = data.split(b",", 2)
                if len(parts) == 3:
                    talker, seq_b, rest = parts
                    shape = known(rest)
                    if (
                        shape is not None
                        and seq_b == nxt_b
                        and shape[0] == talker
                        and len(data) <= MAX_FRAME
                        and seq_xor[nxt] == shape[1]  # (0xFF, not met yet: feed fills it)
                        and (shape[2] == card_frame or shape[2] == device_frame)
                    ):
                        if shape[2] == card_frame:
                            card = new(Card)
                            ct(card, t)
                            cs(card, nxt)
                            cc(card, shape[5])
                            cf(card, shape[6])
                            cd(card, shape[7])
                            ch(card, None)
                            cg(card, True)
                            add(card)
                        else:  # a button, status...: as _one makes it (no gap: the next number)
                            add(shape[3](t, nxt, *shape[4]))
                        n += 1
                        if nxt < SEQ_MODULUS - 1:
                            nxt += 1
                            nxt_b = b"%d" % nxt
                        else:  # 65535: the next wraps to 0, which feed tracks
                            tracker.last = nxt
                            nxt, nxt_b = _next_seq(None)
                        continue
            # anything else: the state written back, then feed
            if n:
                tracker.last = nxt - 1 if nxt_b is not None else tracker.last
                stats["frames"] += n
                n = 0
            out += self.feed(t, data)
            nxt, nxt_b = _next_seq(tracker.last)
            clean = not self._buf and not self._skipping
        if n:
            tracker.last = nxt - 1 if nxt_b is not None else tracker.last
            stats["frames"] += n
        return out

    def _shape(
        self, t: float, data: bytes, talker: bytes, seq_b: bytes, rest: bytes
    ) -> tuple[Any, ...] | None:
        """The shape of ``data`` (split at its first two commas: ``talker``
        with its ``$``, ``seq_b``, ``rest``) if it is exactly one good
        frame, remembered by ``rest`` (fields, checksum, CRLF); None if
        it is not (the general path then decodes it and counts what is
        wrong). A shape is ``(b"$" + talker, the XOR of the sequence digits
        that makes the checksum right, kind, the frame's class, its fields
        but t and seq, and for a Card its card, face_up, deck)``.

        The XOR of a frame's body is its checksum, so that of its sequence
        digits is the checksum's XOR that of the rest (``_BASES`` keeps that
        per shape without its checksum, so a shape met with another
        checksum is not parsed again)."""
        ck = _CK_CRLF.get(rest[-4:])
        if ck is None:
            return None
        base = _BASES.get(rest[:-4])
        if base is None or base[0] != talker:
            m = _CLEAN_FRAME.fullmatch(data)
            if m is None or xor8(m.group(1)) != ck:
                return None
            try:
                _, frame = _parse_body(t, m.group(1))
            except (_Malformed, UnicodeDecodeError):
                return None
            cls = type(frame)
            if isinstance(frame, Card) and frame.hand is None and frame.game:
                kind = _CARD_FRAME
            elif cls is Hello:
                kind = _HELLO_FRAME
            elif cls is HostRequest:
                kind = _HOST_FRAME
            else:
                kind = _DEVICE_FRAME
            values = tuple(getattr(frame, f.name) for f in dataclasses.fields(frame))[2:]
            base = (talker, xor8(seq_b) ^ ck, kind, cls, values, *values[:3])
            _remember(_BASES, rest[:-4], base)
        shape = (base[0], base[1] ^ ck, *base[2:])
        _remember(_KNOWN, rest, shape)
        return shape

    def _one(self, t: float, seq: int, shape: tuple[Any, ...]) -> list[Frame]:
        """The one frame of a known shape, its sequence tracked."""
        stats = self.stats
        kind = shape[2]
        out: list[Frame] = []
        if kind != _HOST_FRAME:
            tracker = self._seq
            if kind == _HELLO_FRAME:
                tracker.last = seq
            elif seq == tracker.last:
                stats["duplicate"] += 1
                return out
            else:
                gap = tracker.advance(t, seq)
                if gap is not None:
                    stats["sequence_gap"] += 1
                    out.append(gap)
        stats["frames"] += 1
        if kind == _CARD_FRAME:
            out.append(new_card(t, seq, *shape[4]))
        else:
            out.append(shape[3](t, seq, *shape[4]))
        return out

    def _feed(self, t: float, data: bytes) -> list[Frame]:
        out: list[Frame] = []
        buf = self._buf + data if self._buf else bytes(data)
        n = len(buf)
        pos = 0
        stats = self.stats
        match_clean = _CLEAN_FRAME.match
        if self._skipping:
            stop = _first_of(buf, 0, n)
            if stop < 0:
                self._buf = b""
                return out
            self._skipping = False
            pos = stop + 1 if buf[stop] == 0x0A else stop
        while pos < n:
            if buf[pos] != 0x24:  # "$"
                start = buf.find(b"$", pos)
                if start < 0:
                    stats["garbage"] += n - pos
                    pos = n
                    break
                stats["garbage"] += start - pos
                pos = start
            m = match_clean(buf, pos)
            if m is not None:  # the common case, in one regex step
                self._decode_body(t, m.group(1), _CK_VALUE[m.group(2)], out)
                pos = m.end()
                continue
            window = min(n, pos + MAX_FRAME)
            lf = buf.find(b"\n", pos + 1, window)
            nxt = buf.find(b"$", pos + 1, lf if lf >= 0 else window)
            if nxt >= 0:
                stats["truncated"] += 1
                pos = nxt
                continue
            if lf >= 0:
                self._decode_frame(t, buf[pos : lf + 1], out)
                pos = lf + 1
                continue
            if window - pos < MAX_FRAME:
                break  # an incomplete frame: wait for more bytes
            stats["too_long"] += 1
            stop = _first_of(buf, window, n)
            if stop < 0:
                self._skipping = True
                pos = n
                break
            pos = stop + 1 if buf[stop] == 0x0A else stop
        self._buf = buf[pos:] if pos < n else b""
        return out

    def _decode_frame(self, t: float, raw: bytes, out: list[Frame]) -> None:
        stats = self.stats
        # raw = b"$" + body + b"*" + ck(2) + b"\r\n"
        if len(raw) < 6 or raw[-2] != 0x0D or raw[-5] != 0x2A:
            stats["malformed"] += 1
            return
        ck = _CK_VALUE.get(raw[-4:-2])
        if ck is None:
            stats["malformed"] += 1
            return
        self._decode_body(t, raw[1:-5], ck, out)

    def _decode_body(self, t: float, body: bytes, ck: int, out: list[Frame]) -> None:
        """The part between ``$`` and ``*`` of a structurally sound frame."""
        stats = self.stats
        if xor8(body) != ck:
            stats["bad_checksum"] += 1
            return
        try:
            seq, frame = _parse_body(t, body)
        except (_Malformed, UnicodeDecodeError):
            stats["malformed"] += 1
            return
        if type(frame) is not HostRequest:
            tracker = self._seq
            is_hello = type(frame) is Hello
            if seq == tracker.last and not is_hello:
                stats["duplicate"] += 1
                return
            gap = tracker.advance(t, seq, restart=is_hello)
            if gap is not None:
                stats["sequence_gap"] += 1
                out.append(gap)
        stats["frames"] += 1
        out.append(frame)


def _next_seq(last: int | None) -> tuple[int, bytes | None]:
    """The number after ``last`` and its canonical digits, for
    ``Decoder.feed_many``; ``(0, None)`` (nothing predicted) after no frame
    and after 65535 (the wrap is left to ``feed``)."""
    if last is None or last >= SEQ_MODULUS - 1:
        return 0, None
    return last + 1, b"%d" % (last + 1)


def _remember(cache: dict[bytes, tuple[Any, ...]], key: bytes, value: tuple[Any, ...]) -> None:
    if len(cache) >= MAX_KNOWN:
        cache.clear()
    cache[key] = value


def _parse_body(t: float, body: bytes) -> tuple[int, Frame]:
    """The sequence number and frame of a body whose checksum verified;
    ``_Malformed`` (or ``UnicodeDecodeError``) if it breaks the protocol."""
    text = body.decode("ascii")
    if not text.isprintable() or "*" in text:
        raise _Malformed
    fields = text.split(",")
    if len(fields) < 3 or not fields[0]:
        raise _Malformed
    seq = _uint(fields[1], SEQ_MODULUS - 1)
    parse = _PARSERS.get(fields[2])
    if parse is None:
        raise _Malformed
    return seq, parse(t, seq, fields[3:])


def _first_of(buf: bytes, start: int, end: int) -> int:
    """Index of the first ``$`` or LF in ``buf[start:end]``, or -1."""
    d = buf.find(b"$", start, end)
    lf = buf.find(b"\n", start, d if d >= 0 else end)
    return lf if lf >= 0 else d


def _text(value: str, what: str) -> str:
    if not value.isascii() or not value.isprintable() or any(c in _FORBIDDEN for c in value):
        raise ValueError(f"{NAME} cannot carry {what}={value!r}: printable ASCII without , * $ CR LF only")
    return value


def _card_field(card: str | None) -> str:
    if card is None:
        return UNREAD
    if card not in _CARDS:
        raise ValueError(f"{NAME}: not a card code: {card!r}")
    return card


class Encoder:
    """Frame in, bytes out. Stateless: each frame's own ``seq`` is written,
    so a fake device fakes a gap by skipping numbers."""

    def encode(self, frame: Frame) -> bytes:
        """The wire bytes of ``frame``; ValueError for a frame this protocol
        cannot carry (or a field it cannot represent)."""
        talker = "SH"
        if isinstance(frame, Hello):
            fields = [
                "HELLO",
                _text(frame.model, "model"),
                _text(frame.firmware, "firmware"),
                _text(frame.serial, "serial"),
            ]
        elif isinstance(frame, Card):
            if frame.hand is not None or not frame.game:
                raise ValueError(f"{NAME} cannot carry a card's hand or a non-game card: {frame!r}")
            fields = ["CARD", _card_field(frame.card)]
            if frame.deck is not None:
                if not 1 <= frame.deck <= 12:
                    raise ValueError(f"{NAME}: deck must be 1-12, not {frame.deck!r}")
                fields += ["F" if frame.face_up else "", str(frame.deck)]
            elif frame.face_up:
                fields.append("F")
        elif isinstance(frame, Button):
            if frame.name not in BUTTONS:
                raise ValueError(f"{NAME} has no button {frame.name!r} (only {sorted(BUTTONS)})")
            fields = ["BTN", frame.name]
        elif isinstance(frame, CutCard):
            fields = ["CUT"]
        elif isinstance(frame, Status):
            if frame.code not in STATUS_CODES:
                raise ValueError(f"{NAME} has no status {frame.code!r} (only {sorted(STATUS_CODES)})")
            fields = ["STAT", frame.code]
            if frame.text:
                fields.append(_text(frame.text, "text"))
        elif isinstance(frame, ShuffleCommit):
            if len(frame.sha256) != 64 or not set(frame.sha256) <= _HEX_LOWER:
                raise ValueError(f"{NAME}: sha256 must be 64 lower-case hex digits, not {frame.sha256!r}")
            if not 0 <= frame.ncards <= 65535:
                raise ValueError(f"{NAME}: ncards out of range: {frame.ncards!r}")
            talker = "AS"
            fields = ["SHUF", _text(frame.shoe_id, "shoe_id"), str(frame.ncards), frame.sha256]
        elif isinstance(frame, ShuffleOrder):
            if not 1 <= len(frame.cards) <= MAX_ORDER_CARDS:
                raise ValueError(f"{NAME}: ORD carries 1 to {MAX_ORDER_CARDS} cards, not {len(frame.cards)}")
            if not 0 <= frame.index <= 65535:
                raise ValueError(f"{NAME}: ORD index out of range: {frame.index!r}")
            talker = "AS"
            fields = ["ORD", str(frame.index), *(_card_field(c) for c in frame.cards)]
        elif isinstance(frame, HostRequest):
            if frame.what not in REQUESTS:
                raise ValueError(f"{NAME}: REQ is STAT or HELLO, not {frame.what!r}")
            talker = "HO"
            fields = ["REQ", frame.what]
        else:
            raise ValueError(f"{NAME} cannot carry {type(frame).__name__} frames")
        seq = frame.seq
        if seq is None or not 0 <= seq < SEQ_MODULUS:
            raise ValueError(f"{NAME} frames carry a seq 0-65535, not {seq!r}")
        body = ",".join([talker, str(seq), *fields]).encode("ascii")
        raw = b"$%s*%02X\r\n" % (body, xor8(body))
        if len(raw) > MAX_FRAME:
            raise ValueError(f"{NAME}: frame would be {len(raw)} bytes, over the {MAX_FRAME}-byte limit")
        return raw
