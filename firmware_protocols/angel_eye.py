"""``angel-eye/2``: Angel Eye II-EX compatible card-reading shoes (RS-232C,
4800 8N1). Sans-IO: bytes in, frames out.

VERIFY AGAINST THE VENDOR'S MANUAL BEFORE PRODUCTION. No vendor document
was at hand: every fact below comes from two independent public
integrations (a C# bridge and a TypeScript parser), as summarised in
docs/devices.md, Angel Eye. Each such fact in this module carries the comment "verify
against the vendor's manual before production"; where the integrations say
nothing, the choice made here is marked "assumption" as well.

Shoe -> host message (verify against the vendor's manual before production)::

    ENQ(05) seq(1 byte) data... ETX(03) BCC(2 ASCII upper-case hex)

BCC = XOR of every byte after ENQ up to and including ETX. Every message is
sent three times with the same seq; a message whose seq and bytes both
equal the last one's is a repeat and is dropped (``duplicate``).

The seq byte is opaque: a printable ASCII character of a short cycle
(``'0'``-``'9'``, ``'0'``-``'F'`` or ``'1'``-``'F'`` in the public C#
integration's tests), not a counter; no modulus is assumed. The decoder
learns the cycle from the stream (:class:`SeqCycle`) and reports a
:class:`SequenceGap` only where a loss is proven: a jump over seq characters
already seen. The gap's ``missing`` is the proven least; it is ``exact``
only when the cycle is learned and the time since the last good message is
too short for the line to have carried one more whole cycle, else the loss
is of unknown size (``exact=False``) and the engine handles it as such
(held, numbering lost), never as a count. A loss of a whole number of cycles
with nothing else skipped is invisible in the seq: a link drop (the driver's
``Link`` event), a restart (``S``) and the shoe's own placement of each card
are what show it.

Every data byte after the command letter has bit 7 set as the shoes send
them (the C# integration's tests: ``D 0x81 0xB8`` = Player's first card, 8 of
spades), which keeps a Player third card's target byte (0x83) clear of ETX.
Bit 7 is don't-care on decoding (accepted set or clear); the encoder sets it.
Every other bit is decoded through a mask; bits this module knows no meaning
for must be zero (else the message is ``malformed``): bits 3-2 of the result
byte, bits 6-1 of the lock byte. Groups, suits, ranks and indexes outside
the tables below are ``malformed`` too. Verify all of this against the
vendor's manual before production.

The data bytes are binary (with bit 7 clear, a Player card at index 3 has
target byte 0x03 = ETX), so a message is delimited by its command's known
length, never by searching for ETX.

==== ============ =========================================================
data frame        notes
==== ============ =========================================================
S    Hello        model "ANGEL-EYE", firmware and serial empty
P    Button       ``STANDBY`` (between coups)
C    CutCard
D    Card         target byte + card byte; ``hand`` from the target
d    Card         as D, ``game=False`` (drawn while locked/in error/settings);
                  a target byte naming no hand (the mode) gives ``hand=None``
R    Button       ``REDEAL``
G    DeviceResult result byte
E    Status       ``ERROR``, text = the reason in words
e    Status       ``OK``, text = ``error cleared: <reason>``
L    Status       ``LOCKED`` / ``UNLOCKED`` (bit0)
M    Status       ``PRESET``, text = ``<addr>=<value>`` (2 + 4 ASCII)
==== ============ =========================================================

Host -> shoe: ``STX(02) 'O' 'P' type(2 ASCII) data(2 ASCII digits) ETX BCC``
(BCC over the bytes after STX through ETX), decoded as :class:`HostRequest`
(``what`` = type + data, e.g. ``LK02``) so a capture's ``>`` lines decode
too; the shoe answers ``ACK(06)`` or ``NAK(15)`` + code, decoded as
:class:`Ack`. Host frames and answers carry no seq and do not touch the
sequence.

``Decoder.stats`` reasons: ``garbage`` (bytes outside any message, counted
in bytes; bytes a bad message claimed are not garbage), ``bad_checksum``,
``malformed``, ``duplicate`` (a repeat of the last message), ``conflicting_duplicate``
(same seq as the last message, different content: one copy was corrupted
in a way the XOR check missed; the first one stands), ``unknown_message``
(a checksummed message with a command this module does not know: it
advances the sequence, since it was not lost, but yields nothing),
``truncated`` (partial message dropped by :meth:`Decoder.reset`),
``sequence_gap``, ``sequence_gap_unknown_size`` (those of them whose size is
unknown) and ``frames``. A checksummed message with a known command but
impossible content is ``malformed`` and does not advance the sequence, so
its loss shows as a :class:`SequenceGap` where its seq proves one.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable

from firmware_protocols.cards import RANKS
from firmware_protocols.frames import (
    UNREAD_CARD_ERROR,
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    HostRequest,
    SequenceGap,
    Status,
)
from firmware_protocols.framing import Malformed as _Malformed
from firmware_protocols.framing import xor8

NAME = "angel-eye/2"
#: The seq is one byte (an opaque character of a short cycle, see SeqCycle).
SEQ_BYTES = 256

#: The line: RS-232C 4800 8N1 (10 bits a byte on the wire); the shortest
#: shoe message is 6 bytes (ENQ seq cmd ETX BCC BCC). Verify against the
#: vendor's manual before production.
DEFAULT_BAUD = 4800
BITS_PER_BYTE = 10
MIN_MESSAGE_BYTES = 6
#: Clean laps in a row after which the seq cycle is taken as known (SeqCycle).
LEARN_LAPS = 2
#: The longest message this module knows (M: ENQ seq M + 6 + ETX BCC BCC).
MAX_MESSAGE_BYTES = 12
#: Bit 7 of every data byte after the command letter: set by the shoes,
#: don't-care on decoding. Verify against the vendor's manual before production.
HIGH_BIT = 0x80

# Control bytes. Verify against the vendor's manual before production.
STX = 0x02
ETX = 0x03
ENQ = 0x05
ACK = 0x06
NAK = 0x15
_START = re.compile(b"[\x02\x05\x06\x15]")

# "S" (start of communication) is the shoe's reset: it restarts the seq;
# verify against the vendor's manual before production.
HELLO_MODEL = "ANGEL-EYE"

# Data bytes after the command letter, per command. Verify against the
# vendor's manual before production.
DATA_LEN: dict[int, int] = {
    ord("S"): 0,
    ord("P"): 0,
    ord("C"): 0,
    ord("R"): 0,
    ord("D"): 2,
    ord("d"): 2,
    ord("G"): 1,
    ord("E"): 1,
    ord("e"): 1,
    ord("L"): 1,
    ord("M"): 6,
}
# Assumption: an unknown command is found by its ETX + verifying BCC within
# this many bytes from ENQ. Verify against the vendor's manual before production.
MAX_UNKNOWN_MESSAGE = 24
HOST_FRAME_LEN = 10  # STX O P t t d d ETX B B
NAK_LEN = 3  # assumption: NAK + 2 ASCII characters. Verify against the vendor's manual before production.

# Target byte: bit 7 don't-care, bits 6-4 the hand, bits 3-0 the index
# within it (1-3). Verify against the vendor's manual before production.
_HAND_GROUPS = {0: "P", 1: "B"}
_OTHER_GROUPS = {2: "burn", 4: "first", 5: "burn_count"}
_TARGET_OF_HAND: dict[str, int] = {
    f"{p}{i}": HIGH_BIT | g << 4 | i for g, p in _HAND_GROUPS.items() for i in (1, 2, 3)
}
# Assumption: the index nibble of burn / first / burn_count targets carries
# nothing we keep; it is accepted whatever it is and written as 1.
_TARGET_OF_HAND.update({name: HIGH_BIT | g << 4 | 1 for g, name in _OTHER_GROUPS.items()})
# ``d`` (a card drawn outside the game): the C# integration reads its target
# group as the mode (0 locked, 1 in error, 2 in settings). A ``d`` whose
# target names no hand is decoded with ``hand=None``; the encoder writes it
# as locked, index 0. Verify against the vendor's manual before production.
_NO_HAND_TARGET = HIGH_BIT

# Card byte: bit 7 don't-care, bits 6-4 suit 1 D, 2 C, 3 S, 4 H; bits 3-0
# rank 1-13. Verify against the vendor's manual before production.
_SUIT_OF_BITS = {1: "D", 2: "C", 3: "S", 4: "H"}
CARD_OF_BYTE: dict[int, str] = {
    s << 4 | r: RANKS[r - 1] + suit for s, suit in _SUIT_OF_BITS.items() for r in range(1, 14)
}
_BYTE_OF_CARD = {c: b | HIGH_BIT for b, c in CARD_OF_BYTE.items()}

# Result byte: bit 7 don't-care, bits 6-4 winner, bits 3-2 zero (no known
# meaning: refused rather than ignored), bit0 Player pair, bit1 Banker pair.
# Verify against the vendor's manual before production.
_RESULT_ZERO_BITS = 0x0C
# Lock byte: bit 7 don't-care, bit0 locked, bits 6-1 zero. Verify against the
# vendor's manual before production.
_LOCK_ZERO_BITS = 0x7E
WINNERS = {1: "player", 2: "tie", 4: "banker", 7: "quit"}
_WINNER_BITS = {w: b for b, w in WINNERS.items()}

# Error byte bits 5-0 (reason); bit 6: the shoe is in error mode.
# Verify against the vendor's manual before production.
ERROR_REASONS = {
    1: UNREAD_CARD_ERROR,
    2: "over-draw",
    3: "button mishandled",
    4: "card pulled back at exit",
    5: "card pulled back midway",
    6: "card code error",
    7: "draw timeout",
}
_REASON_CODE = {v: k for k, v in ERROR_REASONS.items()}
_ERROR_MODE = " (in error mode)"
CLEARED = "error cleared: "

# Host command types and their data. Verify against the vendor's manual before production.
HOST_COMMANDS = frozenset({"LK", "EC", "GP"})

_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_BCC_VALUE: dict[bytes, int] = {f"{i:02X}".encode(): i for i in range(256)}


def _error_text(b: int) -> str:
    # bit 7 don't-care, bit 6 = error mode, bits 5-0 = reason; verify against
    # the vendor's manual before production
    code = b & 0x3F
    reason = ERROR_REASONS.get(code, f"error code {code}")
    return reason + (_ERROR_MODE if b & 0x40 else "")


def _error_byte(text: str) -> int:
    mode = 0
    if text.endswith(_ERROR_MODE):
        text, mode = text[: -len(_ERROR_MODE)], 0x40
    code = _REASON_CODE.get(text)
    if code is None and text.startswith("error code ") and text[11:].isdigit():
        code = int(text[11:])
    if code is None or not 0 <= code <= 0x3F:
        raise ValueError(f"{NAME}: not an error text this protocol can carry: {text!r}")
    return HIGH_BIT | mode | code


def _parse_card(t: float, seq: int, cmd: int, data: bytes) -> Frame:
    # D/d + target byte + card byte; verify against the vendor's manual before production
    target, cb = data[0], data[1]
    group, index = (target >> 4) & 0x07, target & 0x0F  # bit 7 don't-care
    card = CARD_OF_BYTE.get(cb & 0x7F)  # bit 7 don't-care
    if card is None:
        raise _Malformed
    hand: str | None
    prefix = _HAND_GROUPS.get(group)
    if prefix is not None and 1 <= index <= 3:
        hand = f"{prefix}{index}"
    else:
        hand = _OTHER_GROUPS.get(group)
        if hand is None or prefix is not None:
            if cmd == 0x44:  # "D": a game card must name its hand
                raise _Malformed
            hand = None  # "d": the target is the mode the shoe is in
    return Card(t, seq, card, False, None, hand, cmd == 0x44)  # "D"; "d" is not a game card


def _parse_result(t: float, seq: int, cmd: int, data: bytes) -> Frame:
    # bits 6-4 winner, bit0 Player pair, bit1 Banker pair;
    # verify against the vendor's manual before production
    b = data[0]
    winner = WINNERS.get((b >> 4) & 0x07)  # bit 7 don't-care
    if winner is None or b & _RESULT_ZERO_BITS:
        raise _Malformed
    return DeviceResult(t=t, seq=seq, winner=winner, player_pair=bool(b & 1), banker_pair=bool(b & 2))


def _parse_error(t: float, seq: int, cmd: int, data: bytes) -> Frame:
    return Status(t=t, seq=seq, code="ERROR", text=_error_text(data[0]))


def _parse_error_cleared(t: float, seq: int, cmd: int, data: bytes) -> Frame:
    return Status(t=t, seq=seq, code="OK", text=CLEARED + _error_text(data[0]))


def _parse_lock(t: float, seq: int, cmd: int, data: bytes) -> Frame:
    # bit 7 don't-care, bit0 = locked, bits 6-1 zero;
    # verify against the vendor's manual before production
    b = data[0]
    if b & _LOCK_ZERO_BITS:
        raise _Malformed
    return Status(t=t, seq=seq, code="LOCKED" if b & 1 else "UNLOCKED")


def _parse_preset(t: float, seq: int, cmd: int, data: bytes) -> Frame:
    # 2 ASCII address + 4 ASCII value; verify against the vendor's manual before production
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise _Malformed from None
    if not text.isprintable():
        raise _Malformed
    return Status(t=t, seq=seq, code="PRESET", text=f"{text[:2]}={text[2:]}")


# What each command letter means; verify against the vendor's manual before production.
_PARSERS: dict[int, Callable[[float, int, int, bytes], Frame]] = {
    ord("S"): lambda t, seq, c, d: Hello(t=t, seq=seq, model=HELLO_MODEL, firmware="", serial=""),
    ord("P"): lambda t, seq, c, d: Button(t=t, seq=seq, name="STANDBY"),
    ord("C"): lambda t, seq, c, d: CutCard(t=t, seq=seq),
    ord("R"): lambda t, seq, c, d: Button(t=t, seq=seq, name="REDEAL"),
    ord("D"): _parse_card,
    ord("d"): _parse_card,
    ord("G"): _parse_result,
    ord("E"): _parse_error,
    ord("e"): _parse_error_cleared,
    ord("L"): _parse_lock,
    ord("M"): _parse_preset,
}


def _host_command(raw: bytes) -> str | None:
    """``what`` of a host frame (its 10 bytes, BCC verified), or None if it
    is not a command this protocol has."""
    what = raw[3:7].decode("latin-1")
    if raw[1:3] != b"OP" or what[:2] not in HOST_COMMANDS or not (what[2:].isdigit() and what[2:].isascii()):
        return None
    return what


class SeqCycle:
    """The shoe's seq cycle, learned from the stream; says where a loss is
    proven and whether its size is.

    Assumption (verify against the vendor's manual before production): the
    seq characters of one cycle rise in byte value and the cycle wraps from
    its highest to its lowest (``'0'``..``'9'``, ``'0'``..``'9'``
    ``'A'``..``'F'``, ``'1'``..``'F'`` all do); which characters it has, and
    how many, is learned, never assumed. Under it, a character received in
    a good message belongs to the cycle, so a step from ``a`` to ``b`` that
    passes over characters already seen (going up, wrapping past the top)
    proves that at least that many messages were lost. A step over no seen
    character proves nothing (the cycle may hold characters not seen yet)
    and is no gap.

    The proven count is exact only when (1) the cycle is learned:
    ``LEARN_LAPS`` whole laps in a row were received, wrap to wrap, every
    step to the next seen character, the same characters each lap, with the
    decoder counting no bad byte meanwhile (a message lost on a noisy line
    leaves bad bytes; one lost without a trace, in the same place in every
    lap, would hide its character: two laps make that unlikely, nothing
    makes it impossible); and (2) the time since the last good message is shorter than
    the line needs to carry the messages proven lost, one more whole cycle
    and the message received (at ``baud``, 10 bits a byte, 6 bytes the
    shortest message, one copy each: the least the shoe could have sent).
    Otherwise more whole cycles may have been lost too: the size is
    unknown. Times are the driver's read times, taken as arrival times.

    A restart (``S``) and :meth:`reset` (a new connection, perhaps another
    shoe) forget the cycle: it is learned again.
    """

    __slots__ = (
        "_clean_laps",
        "_lap_first",
        "_lap_ok",
        "_lap_trouble",
        "_order",
        "_succ",
        "last",
        "last_t",
        "learned",
        "msg_s",
    )

    def __init__(self, baud: int = DEFAULT_BAUD) -> None:
        if not 50 <= baud <= 4_000_000:
            raise ValueError(f"{NAME}: baud rate {baud} is outside 50..4000000")
        #: line seconds of the shortest message (one copy)
        self.msg_s = MIN_MESSAGE_BYTES * BITS_PER_BYTE / baud
        self.reset()

    def reset(self) -> None:
        self.last: int | None = None
        self.last_t = 0.0
        self.learned = False
        self._order: list[int] = []  # the seq characters seen, ascending
        self._succ: dict[int, int] = {}  # each one's next in the cycle as known
        self._lap_first: int | None = None  # first character of the lap in progress
        self._lap_ok = False
        self._lap_trouble = 0
        self._clean_laps = 0  # whole clean laps in a row

    @property
    def known(self) -> int:
        """How many seq characters have been seen (the cycle's length once
        learned)."""
        return len(self._order)

    def _add(self, seq: int) -> None:
        order = self._order
        order.append(seq)
        order.sort()
        self._succ = dict(zip(order, order[1:] + order[:1], strict=True))
        self.learned = False  # a character not seen before: the cycle was not known
        self._clean_laps = 0

    def _between(self, a: int, b: int) -> int:
        """Seen characters strictly between ``a`` and ``b`` going up (and
        wrapping past the top); both are seen."""
        order = self._order
        ia, ib = order.index(a), order.index(b)
        return ib - ia - 1 if ib > ia else len(order) - ia - 1 + ib

    def advance(self, t: float, seq: int, trouble: int, *, restart: bool = False) -> SequenceGap | None:
        """Record ``seq`` (a good message that is not a repeat of the last)
        received at ``t``; ``trouble`` is the decoder's count of bad bytes
        and messages so far. Returns the gap it proves, if any."""
        last = self.last
        if restart or last is None:
            if restart:
                self.reset()
            self.last, self.last_t = seq, t
            if seq not in self._succ:
                self._add(seq)
            # a lap opens here: it teaches the cycle if it reaches the top
            # having started at the bottom (no lower character shows up)
            self._lap_first, self._lap_ok, self._lap_trouble = seq, True, trouble
            return None
        window = t - self.last_t
        self.last, self.last_t = seq, t
        if seq == last:
            # Not a repeat (its bytes differ) and too late to be a copy: a
            # whole cycle (at least) was lost in between.
            n = len(self._order)
            self._lap_first = None
            self._clean_laps = 0
            return SequenceGap(t=t, seq=seq, expected=self._succ[last], missing=max(1, n - 1), exact=False)
        if self._succ.get(last) == seq:
            missing = 0
        else:
            if seq not in self._succ:
                self._add(seq)
            missing = self._between(last, seq)
        wrapped = seq < last
        if wrapped:
            if (
                self._lap_ok
                and missing == 0
                and self._lap_first == self._order[0]
                and last == self._order[-1]
                and trouble == self._lap_trouble
            ):
                self._clean_laps += 1
                if self._clean_laps >= LEARN_LAPS:
                    self.learned = True
            else:
                self._clean_laps = 0
            self._lap_first, self._lap_ok, self._lap_trouble = seq, missing == 0, trouble
        elif missing:
            self._lap_ok = False
        if not missing:
            return None
        expected = self._succ[last]
        exact = self.learned and window < (missing + 1 + len(self._order)) * self.msg_s
        return SequenceGap(t=t, seq=seq, expected=expected, missing=missing, exact=exact)

    def copy_or_cycle(self, t: float) -> bool:
        """For a message with the last one's seq but other bytes, received
        at ``t``: True if it may be a corrupted copy of the last (sent right
        after it: within two of the longest messages, or before the line
        could have carried one more cycle), False if it came too late for
        that, after a whole cycle lost. Verify the back-to-back triple send
        against the vendor's manual before production."""
        window = t - self.last_t
        copies_s = 2 * MAX_MESSAGE_BYTES * BITS_PER_BYTE * self.msg_s / (MIN_MESSAGE_BYTES * BITS_PER_BYTE)
        return window < max(copies_s, len(self._order) * self.msg_s)


class Decoder:
    """Bytes in, frames out; resynchronises on the next ENQ / STX / ACK /
    NAK after anything it cannot use, and counts what it dropped in
    :attr:`stats`."""

    def __init__(self, baud: int = DEFAULT_BAUD) -> None:
        self.stats: collections.Counter[str] = collections.Counter()
        self._seq = SeqCycle(baud)
        self._last_raw = b""
        self._buf = b""
        # Bytes still claimed by the last bad message: skipped while
        # resynchronising, not garbage, and a lone ACK/NAK among them is
        # not believed.
        self._claimed = 0

    def reset(self) -> None:
        """Forget the partial message and the sequence (a new connection)."""
        if self._buf:
            self.stats["truncated"] += 1
        self._buf = b""
        self._claimed = 0
        self._seq.reset()
        self._last_raw = b""

    def _skip(self, nbytes: int) -> None:
        claimed = min(self._claimed, nbytes)
        self._claimed -= claimed
        if nbytes > claimed:
            self.stats["garbage"] += nbytes - claimed

    def _bad(self, reason: str, claimed: int) -> None:
        self.stats[reason] += 1
        self._claimed = max(self._claimed, claimed)

    def feed(self, t: float, data: bytes) -> list[Frame]:
        """Decode a chunk read at ``t``; returns the frames it completed,
        each stamped with ``t``."""
        out: list[Frame] = []
        buf = self._buf + data if self._buf else bytes(data)
        n = len(buf)
        pos = 0
        search = _START.search
        while True:
            m = search(buf, pos)
            if m is None:
                self._skip(n - pos)
                pos = n
                break
            start = m.start()
            if start > pos:
                self._skip(start - pos)
            pos = start
            lead = buf[start]
            after: int | None
            if lead == ENQ:
                after = self._shoe_message(t, buf, start, n, out)
            elif lead == STX:
                after = self._host_request(t, buf, start, n, out)
            elif self._claimed:
                # A lone answer byte inside what a bad message claimed is
                # more likely a byte of that message than an answer.
                self._skip(1)
                after = start + 1
            elif lead == ACK:
                # the shoe's answers: ACK, NAK + code; verify against the vendor's manual before production
                self.stats["frames"] += 1
                out.append(Ack(t=t, seq=None, ok=True))
                after = start + 1
            else:
                after = self._nak(t, buf, start, n, out)
            if after is None:  # the rest of the message is still to come
                break
            pos = after
        self._buf = buf[pos:] if pos < n else b""
        return out

    def _shoe_message(self, t: float, buf: bytes, start: int, n: int, out: list[Frame]) -> int | None:
        """The shoe's message at ``start`` (ENQ seq cmd data ETX BCC):
        where decoding goes on, or None when it is not all read yet."""
        if n - start < 3:
            return None
        cmd = buf[start + 2]
        nbytes = DATA_LEN.get(cmd)
        if nbytes is None:
            return self._unknown(t, buf, start, n, out)
        end = start + 6 + nbytes
        if end > n:
            return None
        etx = end - 3
        bcc = _BCC_VALUE.get(buf[etx + 1 : end])
        if buf[etx] != ETX or bcc is None:
            self._bad("malformed", end - start - 1)
            return start + 1
        # BCC: XOR of seq through ETX; verify against the vendor's manual before production
        if xor8(buf[start + 1 : etx + 1]) != bcc:
            self._bad("bad_checksum", end - start - 1)
            return start + 1
        self._claimed = 0
        seq = buf[start + 1]
        raw = buf[start:end]
        if seq == self._seq.last and raw == self._last_raw:
            self.stats["duplicate"] += 1  # the usual 2nd and 3rd copy: no need to parse it
            return end
        try:
            frame = _PARSERS[cmd](t, seq, cmd, buf[start + 3 : etx])
        except _Malformed:
            self.stats["malformed"] += 1
            return end
        self._accept(t, seq, raw, frame, out)
        return end

    def _host_request(self, t: float, buf: bytes, start: int, n: int, out: list[Frame]) -> int | None:
        """A host command at ``start`` (STX O P tt dd ETX BCC; verify against
        the vendor's manual before production): where decoding goes on, or
        None when it is not all read yet."""
        end = start + HOST_FRAME_LEN
        if end > n:
            return None
        bcc = _BCC_VALUE.get(buf[end - 2 : end])
        if buf[end - 3] != ETX or bcc is None:
            self._bad("malformed", HOST_FRAME_LEN - 1)
            return start + 1
        if xor8(buf[start + 1 : end - 2]) != bcc:
            self._bad("bad_checksum", HOST_FRAME_LEN - 1)
            return start + 1
        self._claimed = 0
        what = _host_command(buf[start:end])
        if what is None:
            self.stats["malformed"] += 1
            return end
        self.stats["frames"] += 1
        out.append(HostRequest(t=t, seq=None, what=what))
        return end

    def _nak(self, t: float, buf: bytes, start: int, n: int, out: list[Frame]) -> int | None:
        """The shoe's NAK + code at ``start``: where decoding goes on, or
        None when it is not all read yet."""
        end = start + NAK_LEN
        if end > n:
            return None
        code = buf[start + 1 : end]
        if not code.isalnum():
            self._bad("malformed", NAK_LEN - 1)
            return start + 1
        self.stats["frames"] += 1
        out.append(Ack(t=t, seq=None, ok=False, code=code.decode("ascii")))
        return end

    def _unknown(self, t: float, buf: bytes, start: int, n: int, out: list[Frame]) -> int | None:
        """An ENQ message with a command this module does not know: find its
        end by an ETX followed by a verifying BCC. Returns where to go on,
        or None to wait for more bytes.

        Only a letter is taken for a command, and never inside the bytes a
        bad message claimed: there, a chance ETX + matching BCC among its
        bytes would otherwise pass for a message and move the sequence,
        which would let the next repeat of a real message through twice."""
        if self._claimed or buf[start + 2] not in _LETTERS:
            self._bad("malformed", 2)
            return start + 1
        limit = min(n, start + MAX_UNKNOWN_MESSAGE)
        bcc = 0
        for etx in range(start + 1, limit):
            bcc ^= buf[etx]
            if buf[etx] == ETX and etx >= start + 3:
                if etx + 3 > n:
                    return None
                if _BCC_VALUE.get(buf[etx + 1 : etx + 3]) == bcc:
                    self._claimed = 0
                    seq = buf[start + 1]
                    raw = buf[start : etx + 3]
                    if seq == self._seq.last and (raw == self._last_raw or self._seq.copy_or_cycle(t)):
                        self.stats["duplicate" if raw == self._last_raw else "conflicting_duplicate"] += 1
                    else:
                        # Not lost: it advances the sequence, but means
                        # nothing to us. Verify against the vendor's manual
                        # before production.
                        self.stats["unknown_message"] += 1
                        self._last_raw = raw
                        self._advance(t, seq, False, out)
                    return etx + 3
        if n < start + MAX_UNKNOWN_MESSAGE:
            return None
        self._bad("malformed", 2)
        return start + 1

    def _accept(self, t: float, seq: int, raw: bytes, frame: Frame, out: list[Frame]) -> None:
        # Every message comes three times with one seq; verify against the vendor's manual before production.
        restart = type(frame) is Hello
        if seq == self._seq.last and not restart and self._seq.copy_or_cycle(t):
            # Identical copies were dropped before parsing: this one differs.
            self.stats["conflicting_duplicate"] += 1
            return
        self._last_raw = raw
        self._advance(t, seq, restart, out)
        self.stats["frames"] += 1
        out.append(frame)

    def _advance(self, t: float, seq: int, restart: bool, out: list[Frame]) -> None:
        stats = self.stats
        trouble = stats["garbage"] + stats["bad_checksum"] + stats["malformed"]
        trouble += stats["conflicting_duplicate"] + stats["truncated"]
        gap = self._seq.advance(t, seq, trouble, restart=restart)
        if gap is not None:
            stats["sequence_gap"] += 1
            if not gap.exact:
                stats["sequence_gap_unknown_size"] += 1
            out.append(gap)


def _bcc(body: bytes) -> bytes:
    return b"%02X" % xor8(body)


def _device(seq: int | None, data: bytes) -> bytes:
    if seq is None:
        raise ValueError(f"{NAME}: shoe messages carry a seq byte; frame.seq is None")
    body = bytes([seq & 0xFF]) + data + b"\x03"
    return b"\x05" + body + _bcc(body)


class Encoder:
    """Frame in, bytes out. Stateless: a shoe message carries
    ``frame.seq & 0xFF`` and is emitted once (see :meth:`encode_repeated`
    for the shoe's triple send).

    Fields the wire has no room for are refused (ValueError) when they
    change what a frame means (an unread, face-up or deck-coded card, a card
    without a hand, an unknown status), and left out when descriptive only:
    ``Hello`` model, firmware and serial (the message is a bare ``S``).
    """

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, Hello):
            return _device(frame.seq, b"S")
        if isinstance(frame, Button):
            letter = {"STANDBY": b"P", "REDEAL": b"R"}.get(frame.name)
            if letter is None:
                raise ValueError(f"{NAME} has no button {frame.name!r} (only STANDBY, REDEAL)")
            return _device(frame.seq, letter)
        if isinstance(frame, CutCard):
            return _device(frame.seq, b"C")
        if isinstance(frame, Card):
            return _device(frame.seq, self._card(frame))
        if isinstance(frame, DeviceResult):
            bits = _WINNER_BITS.get(frame.winner)
            if bits is None:
                raise ValueError(
                    f"{NAME}: winner must be one of {sorted(_WINNER_BITS)}, not {frame.winner!r}"
                )
            byte = HIGH_BIT | bits << 4 | frame.player_pair | frame.banker_pair << 1
            return _device(frame.seq, b"G" + bytes([byte]))
        if isinstance(frame, Status):
            return _device(frame.seq, self._status(frame))
        if isinstance(frame, HostRequest):
            what = frame.what
            if (
                len(what) != 4
                or what[:2] not in HOST_COMMANDS
                or not (what[2:].isdigit() and what[2:].isascii())
            ):
                raise ValueError(f"{NAME}: host command is LKnn, ECnn or GPnn, not {what!r}")
            body = b"OP" + what.encode("ascii") + b"\x03"
            return b"\x02" + body + _bcc(body)
        if isinstance(frame, Ack):
            if frame.ok:
                return b"\x06"
            code = frame.code.encode("ascii", "replace")
            if len(code) != NAK_LEN - 1 or not code.isalnum():
                raise ValueError(f"{NAME}: NAK code is 2 ASCII letters or digits, not {frame.code!r}")
            return b"\x15" + code
        raise ValueError(f"{NAME} cannot carry {type(frame).__name__} frames")

    def encode_repeated(self, frame: Frame, times: int = 3) -> bytes:
        """The message as the shoe sends it: ``times`` identical copies
        (three, per the public integrations; verify against the vendor's
        manual before production)."""
        return self.encode(frame) * times

    @staticmethod
    def _card(frame: Card) -> bytes:
        if frame.card is None or frame.face_up or frame.deck is not None:
            raise ValueError(f"{NAME} cannot carry an unread, face-up or deck-coded card: {frame!r}")
        if frame.hand is None and frame.game:
            raise ValueError(f"{NAME}: the shoe places every card on a hand; this card has none: {frame!r}")
        target = _NO_HAND_TARGET if frame.hand is None else _TARGET_OF_HAND.get(frame.hand)
        cb = _BYTE_OF_CARD.get(frame.card)
        if target is None or cb is None:
            raise ValueError(f"{NAME}: cannot carry hand {frame.hand!r} / card {frame.card!r}")
        return (b"D" if frame.game else b"d") + bytes([target, cb])

    @staticmethod
    def _status(frame: Status) -> bytes:
        if frame.code == "ERROR":
            return b"E" + bytes([_error_byte(frame.text)])
        if frame.code == "OK":
            if not frame.text.startswith(CLEARED):
                raise ValueError(f"{NAME}: OK is only sent as {CLEARED!r}<reason>, not {frame.text!r}")
            return b"e" + bytes([_error_byte(frame.text[len(CLEARED) :])])
        if frame.code in ("LOCKED", "UNLOCKED"):
            return b"L" + (b"\x81" if frame.code == "LOCKED" else b"\x80")
        if frame.code == "PRESET":
            text = frame.text
            if len(text) != 7 or text[2] != "=" or not text.isascii() or not text.isprintable():
                raise ValueError(f"{NAME}: PRESET text is <2 chars>=<4 chars>, not {text!r}")
            return b"M" + (text[:2] + text[3:]).encode("ascii")
        raise ValueError(f"{NAME} has no status {frame.code!r}")
