"""A small byte language for engine inputs, so that a fuzzer's bytes become a
table session: frames of every kind (cards read, unread, foreign, placed on
hands; buttons; cut card; status codes; restarts; sequence gaps; link
changes; device results; shuffler commitments), supervisor commands and the
passing of time.

Input layout: three configuration bytes, then operations. Each operation is
an opcode byte (low nibble: what; high nibble: seconds since the last one,
in quarters) and a fixed number of argument bytes; reading past the end
gives zeros, so every byte string is a session.

``encode_frames`` writes the bytes of a list of decoded frames, which is
how the capture corpus becomes seeds for the engine harness.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from controller.cards import ALL_CARDS
from firmware_protocols.frames import (
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    HostRequest,
    Link,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)

T0 = 1_763_800_000.0
PROFILES = ("punto_banco", "ez_baccarat", "baccarat_27")
EXTRA_CARD = ("burn", "next_coup", "void", "burn")
BURN = ("first_card", "decks", "fixed:1", "fixed:3")
UNREAD = 52  # card byte % 53
HANDS: tuple[str | None, ...] = (
    None,
    None,
    None,
    "P1",
    "B1",
    "P2",
    "B2",
    "P3",
    "B3",
    "burn",
    "first",
    "burn_count",
)
BUTTONS = ("NEWSHOE", "RESULT", "STANDBY", "REDEAL")
STATUS = (
    "OK",
    "JAM",
    "EMPTY",
    "LID_OPEN",
    "READER_FAULT",
    "LOW_POWER",
    "ERROR",
    "LOCKED",
    "UNLOCKED",
    "PRESET",
)
WINNERS = ("player", "banker", "tie", "quit")
COMMANDS = ("void", "enter_card", "accept", "new_shoe", "end_shoe")

# opcodes (low nibble)
OP_CARD = (0, 1, 2, 3, 4)  # the common case: several opcodes
OP_BUTTON = 5
OP_RESULT = 6
OP_CUT = 7
OP_STATUS = 8
OP_HELLO = 9
OP_GAP = 10
OP_LINK = 11
OP_DEVICE_RESULT = 12
OP_SHUFFLE = 13
OP_COMMAND = 14
OP_TIME = 15
ARGS = {0: 3, 1: 3, 2: 3, 3: 3, 4: 3, 5: 1, 6: 0, 7: 0, 8: 1, 9: 0, 10: 1, 11: 1, 12: 1, 13: 2, 14: 3, 15: 1}


@dataclass(frozen=True)
class Setup:
    """The table an input plays at."""

    profile: str
    decks: int
    rules: tuple[tuple[str, Any], ...]
    odds: bool
    roads: bool


@dataclass(frozen=True)
class Step:
    """One thing that happens: a frame, a command payload (JSON bytes, to
    go through the parser) or a tick, at time ``t``."""

    t: float
    frame: Frame | None = None
    command: bytes | None = None
    tick: bool = False


def setup_of(c0: int, c1: int, c2: int) -> Setup:
    rules: dict[str, Any] = {
        "coup_boundary": "auto" if c0 & 0x04 else "button",
        "after_cut": "last" if c0 & 0x08 else "one_more",
        "extra_card": EXTRA_CARD[(c0 >> 4) & 3],
        "demo_coups": (c0 >> 6) & 3,
        "burn": BURN[(c1 >> 4) & 3],
        "cut_card_min": 1 + c2 % 20,
    }
    return Setup(
        profile=PROFILES[c0 % 3],
        decks=1 + (c1 & 0x0F) % 12,
        rules=tuple(sorted(rules.items())),
        odds=bool(c1 & 0x40),
        roads=bool(c1 & 0x80),
    )


def card_of(b: int) -> str | None:
    i = b % 53
    return None if i == UNREAD else ALL_CARDS[i]


def _shuffle(seed: int, ncards: int, decks: int) -> list[str]:
    """A deterministic order of ``ncards`` cards from a ``decks``-deck shoe."""
    shoe = [c for c in ALL_CARDS for _ in range(decks)]
    state = seed * 2654435761 + 1
    for i in range(len(shoe) - 1, 0, -1):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        j = (state >> 33) % (i + 1)
        shoe[i], shoe[j] = shoe[j], shoe[i]
    return shoe[:ncards]


def command_payload(a: int, b: int, c: int, cid: int) -> bytes:
    name = COMMANDS[a % 5]
    cmd: dict[str, Any] = {"id": cid, "cmd": name}
    if name in ("void", "enter_card", "accept"):
        cmd["coup"] = 1 + b % 8 if b < 0xF8 else 10**6 + b
    if name == "void":
        cmd["reason"] = "fuzz" if c & 1 else ""
    if name == "enter_card":
        card = card_of(c) or "AS"
        cmd["card"] = card.lower() if c & 0x80 else card
    return json.dumps(cmd).encode()


def steps(data: bytes) -> tuple[Setup, list[Step]]:
    """The table and the session an input describes."""
    c0, c1, c2 = (data + b"\0\0\0")[:3]
    setup = setup_of(c0, c1, c2)
    out: list[Step] = []
    t = T0
    seq = 0
    pos = 3
    n = len(data)
    while pos < n:
        op = data[pos]
        kind = op & 0x0F
        args = (data[pos + 1 : pos + 1 + ARGS[kind]] + b"\0\0\0")[:3]
        pos += 1 + ARGS[kind]
        t += (op >> 4) * 0.25
        a, b, c = args
        seq = (seq + 1) % 65536
        if kind in OP_CARD:
            # flags b: bit0 face up, bit6 a coded deck (bits 1-4; over the
            # shoe's decks is foreign); hand c: bit6 placed by the device
            # (low bits: where), high nibble F: drawn out of the game
            deck = (b >> 1) & 0x0F if b & 0x40 else 0
            hand = HANDS[(c & 0x3F) % len(HANDS)] if c & 0x40 else None
            card = Card(t, seq, card_of(a), bool(b & 1), deck or None, hand, (c & 0xF0) != 0xF0)
            out.append(Step(t, card))
        elif kind == OP_BUTTON:
            out.append(Step(t, Button(t, seq, BUTTONS[a % 4])))
        elif kind == OP_RESULT:
            out.append(Step(t, Button(t, seq, "RESULT")))
        elif kind == OP_CUT:
            out.append(Step(t, CutCard(t, seq)))
        elif kind == OP_STATUS:
            code = STATUS[a % len(STATUS)]
            out.append(Step(t, Status(t, seq, code, "fuzz" if a & 0x80 else "")))
        elif kind == OP_HELLO:
            seq = 0
            out.append(Step(t, Hello(t, 0, "FUZZ", "1.0", "0001")))
        elif kind == OP_GAP:
            missing = 1 + a % 8
            expected = seq
            seq = (seq + missing) % 65536
            out.append(Step(t, SequenceGap(t, seq, expected, missing)))
        elif kind == OP_LINK:
            if a % 4 < 2:
                out.append(Step(t, Link(t, None, bool(a & 1), "fuzz" if a & 4 else "")))
            elif a % 4 == 2:
                out.append(Step(t, HostRequest(t, None, "STAT")))
            else:
                out.append(Step(t, Ack(t, None, bool(a & 4), "" if a & 4 else "01")))
        elif kind == OP_DEVICE_RESULT:
            out.append(Step(t, DeviceResult(t, seq, WINNERS[a % 4], bool(a & 4), bool(a & 8))))
        elif kind == OP_SHUFFLE:
            out.extend(_shuffle_steps(t, seq, a, b, setup.decks))
            seq = (seq + 4) % 65536
        elif kind == OP_COMMAND:
            out.append(Step(t, command=command_payload(a, b, c, pos)))
        elif kind == OP_TIME:
            if a == 0xFF:  # the wall clock steps back (NTP)
                t -= 5.0
            else:
                t += a * 2.0  # up to 510 s: past any correction deadline
            out.append(Step(t, tick=True))
    return setup, out


def _shuffle_steps(t: float, seq: int, a: int, b: int, decks: int) -> Iterator[Step]:
    """A shuffler's commitment and order: true (the order hashes to the
    commitment), false, or out of range, from ``a``."""
    ncards = 1 + b
    order = _shuffle(a, ncards, decks)
    text = ",".join(order)
    sha = hashlib.sha256(text.encode("ascii")).hexdigest()
    variant = a % 4
    if variant == 1:
        sha = hashlib.sha256(b"not the order").hexdigest()
    if variant == 2:
        ncards = 0 if a & 0x10 else 1000
    yield Step(t, ShuffleCommit(t, seq, "S1", ncards, sha))
    if variant == 3:
        yield Step(t, ShuffleOrder(t, seq + 1, ncards, ("AS",)))
        return
    for i in range(0, len(order), 16):
        yield Step(t, ShuffleOrder(t, seq + 1, i, tuple(order[i : i + 16])))


# --- frames to bytes (seeds) -------------------------------------------------


def encode_frames(frames: list[Frame], c0: int = 0, c1: int = 7, c2: int = 11) -> bytes:
    """The op bytes of a frame sequence (what the op language can say of it;
    timestamps become the high nibbles, capped at 3.75 s a step)."""
    out = bytearray([c0, c1, c2])
    last_t: float | None = None
    for f in frames:
        dt = 0.0 if last_t is None else max(0.0, f.t - last_t)
        last_t = f.t
        hi = min(15, int(dt * 4)) << 4
        if isinstance(f, Card):
            a = UNREAD if f.card is None else ALL_CARDS.index(f.card)
            b = int(f.face_up) | (((f.deck & 0x0F) << 1 | 0x40) if f.deck else 0)
            c = (HANDS.index(f.hand) | 0x40) if f.hand in HANDS and f.hand is not None else 0
            c |= 0 if f.game else 0xF0
            out += bytes([hi | 0, a, b, c])
        elif isinstance(f, Button):
            if f.name == "RESULT":
                out.append(hi | OP_RESULT)
            elif f.name in BUTTONS:
                out += bytes([hi | OP_BUTTON, BUTTONS.index(f.name)])
        elif isinstance(f, CutCard):
            out.append(hi | OP_CUT)
        elif isinstance(f, Status) and f.code in STATUS:
            out += bytes([hi | OP_STATUS, STATUS.index(f.code)])
        elif isinstance(f, Hello):
            out.append(hi | OP_HELLO)
        elif isinstance(f, SequenceGap):
            out += bytes([hi | OP_GAP, max(0, min(7, f.missing - 1))])
        elif isinstance(f, DeviceResult) and f.winner in WINNERS:
            a = WINNERS.index(f.winner) | f.player_pair << 2 | f.banker_pair << 3
            out += bytes([hi | OP_DEVICE_RESULT, a])
    return bytes(out)
