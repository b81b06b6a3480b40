"""Builds the regression captures in this folder from readable scripts.

Run on purpose only (``python -m tests.captures.build``); the ``.shoelog``
files it writes are checked in, and ``tests/test_captures.py`` replays them
against the checked-in ``*.expected.jsonl`` (regenerated only with
``SHOE_REGEN_CAPTURES=1``, after reading the diff).

Every capture and the rule it pins is listed in ``README.md`` beside this
file (``tests/test_captures.py`` checks that none is missing there).

Script steps (one per line):
  START                     HELLO, NEWSHOE, a 3 exposed and three cards burned
  START1                    HELLO, NEWSHOE, an ace exposed and one card burned
                            (sequence 0-3, as the engine's unit tests start)
  HELLO                     device (re)start: sequence restarts at 0
  CARD <c> [F] [deck]       a card (XX = unread, F = face up)
  BTN <name> | CUT | STAT <code>
  SHUF <cards...>           shuffler commitment + order for the given cards
  GAP <n>                   skip n sequence numbers (frames lost on the line)
  BADCK <step>              the step's frame with a wrong checksum (its
                            sequence number is used, so the next frame shows a gap)
  SPLIT <k> <step>          the step's frame as k chunks of raw bytes
  GARBAGE <text>            raw bytes on the line outside any frame
  WAIT <seconds>            let time pass
  COUP <cards...>           the cards then BTN RESULT

Angel Eye captures (``protocol=angel-eye/2``) write each message three
times, as the shoe does, with bit 7 set on every data byte, and add:
  CARD <c> <hand>           the shoe's own placement (P1..B3, burn, first)
  RESULT <winner> [pp] [bp] the shoe's own result (G message)
  COUP P:<cards> B:<cards>  a coup as the shoe deals it: P1 B1 P2 B2 [P3] [B3]
                            placed, then the G message with the winner and
                            pairs worked out here
  STAT <code> [text...]     a status (ERROR / OK "error cleared: ..." /
                            LOCKED / UNLOCKED) with its text
  CYCLE <characters>        the seq is the next character of this cycle
                            (restarting at HELLO), as real shoes send it;
                            without it, the seq counts 0-255 as a byte
  ONCE                      each message once from here (as the public C#
                            integration's tests inject them), not three times
  LOWBITS                   data bytes with bit 7 clear (the encoding this
                            project wrote before it knew shoes set it)

The frames of the cycle captures are built the way the public C#
integration's tests build theirs (keepcodings/AngelEye,
AngelEyeBridge.Tests/SerialListenerCharacterizationTests.cs, BuildActiveReport:
ENQ, the seq character, the data bytes, ETX, then the BCC over seq..ETX as
two upper-case hex digits; data bytes with bit 7 set, e.g. ``D 0x81 0xB8``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from firmware_protocols import angel_eye
from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from firmware_protocols.shoe_ascii import Encoder

HERE = Path(__file__).parent
T0 = 1_763_800_000.0

HEADER = "START"  # HELLO, NEWSHOE, first card 3S then 3 burned
_POINTS = {r: (i + 1) % 10 if i < 9 else 0 for i, r in enumerate("A23456789TJQK")}


def _angel_coup(words: list[str]) -> list[str]:
    """``COUP P:9S,KH B:2C,3D`` as the steps an Angel Eye sends: each card on
    its hand in dealing order, then its own result (worked out here, apart
    from the engine)."""
    hands = {w[0]: w[2:].split(",") for w in words}
    player, banker = hands["P"], hands["B"]
    order = [("P1", player[0]), ("B1", banker[0]), ("P2", player[1]), ("B2", banker[1])]
    order += [("P3", player[2])] if len(player) > 2 else []
    order += [("B3", banker[2])] if len(banker) > 2 else []
    p = sum(_POINTS[c[0]] for c in player) % 10
    b = sum(_POINTS[c[0]] for c in banker) % 10
    winner = "player" if p > b else "banker" if b > p else "tie"
    pairs = ["pp"] * (player[0][0] == player[1][0]) + ["bp"] * (banker[0][0] == banker[1][0])
    return [f"CARD {c} {h}" for h, c in order] + [" ".join(["RESULT", winner, *pairs])]


def _expand(script: str) -> list[str]:
    steps: list[str] = []
    for raw in script.strip().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line == "START":
            steps += ["HELLO", "BTN NEWSHOE", "CARD 3S", "CARD 4C", "CARD 5D", "CARD 6H"]
        elif line == "START1":  # an ace exposed, one card burned: sequence 0-3, as the engine's unit tests
            steps += ["HELLO", "BTN NEWSHOE", "CARD AS", "CARD 2S"]
        elif line.startswith("COUP P:"):
            steps += _angel_coup(line.split()[1:])
        elif line.startswith("COUP "):
            steps += [f"CARD {c}" for c in line.split()[1:]] + ["BTN RESULT"]
        else:
            steps.append(line)
    return steps


class _Writer:
    def __init__(self, meta: dict[str, str]) -> None:
        self.lines = ["# " + " ".join(f"{k}={v}" for k, v in meta.items())]
        self.t = T0
        self.seq = 0
        self.enc = Encoder()
        self.angel = meta.get("protocol") == "angel-eye/2"
        self.angel_enc = angel_eye.Encoder()
        self.cycle: bytes | None = None  # the Angel Eye seq cycle (None: a 0-255 byte)
        self.copies = 3
        self.low_bits = False

    def frame(self, step: str) -> Frame:
        w = step.split()
        kind = w[0]
        t, seq = self.t, self.seq
        if kind == "HELLO":
            self.seq = seq = 0
            return Hello(t, 0, "FAKE-1", "1.0", "000001")
        if kind == "CARD":
            card = None if w[1] == "XX" else w[1]
            if self.angel:
                return Card(t, seq, card, hand=w[2])
            face_up = len(w) > 2 and w[2] == "F"
            deck = int(w[-1]) if len(w) > 2 and w[-1].isdigit() else None
            return Card(t, seq, card, face_up=face_up, deck=deck)
        if kind == "RESULT":
            return DeviceResult(t, seq, w[1], "pp" in w[2:], "bp" in w[2:])
        if kind == "BTN":
            return Button(t, seq, w[1])
        if kind == "CUT":
            return CutCard(t, seq)
        if kind == "STAT":
            return Status(t, seq, w[1], " ".join(w[2:]))
        raise ValueError(step)

    def step(self, step: str) -> None:
        w = step.split()
        kind = w[0]
        if kind == "WAIT":
            self.t += float(w[1])
            return
        if kind == "CYCLE":
            self.cycle = w[1].encode("ascii")
            return
        if kind == "ONCE":
            self.copies = 1
            return
        if kind == "LOWBITS":
            self.low_bits = True
            return
        if kind == "GAP":
            self.seq += int(w[1])
            return
        if kind == "GARBAGE":
            self.t += 0.1
            self.lines.append(f"{self.t:.3f} < hex:{' '.join(w[1:]).encode().hex()}")
            return
        if kind == "SHUF":
            cards = w[1:]
            digest = hashlib.sha256(",".join(cards).encode()).hexdigest()
            self._emit(ShuffleCommit(self.t, self.seq, "SHOE-1", len(cards), digest))
            for i in range(0, len(cards), 16):
                self._emit(ShuffleOrder(self.t, self.seq, i, tuple(cards[i : i + 16])))
            return
        if kind == "BADCK":
            data = self.enc.encode(self.frame(" ".join(w[1:])))
            star = data.rindex(b"*")
            bad = b"00" if data[star + 1 : star + 3] != b"00" else b"11"
            data = data[: star + 1] + bad + b"\r\n"
            self.lines.append(f"{self.t:.3f} < hex:{data.hex()}")
            self._advance()
            return
        if kind == "SPLIT":
            k = int(w[1])
            data = self.enc.encode(self.frame(" ".join(w[2:])))
            size = -(-len(data) // k)
            for i in range(0, len(data), size):
                self.lines.append(f"{self.t:.3f} < hex:{data[i : i + size].hex()}")
                self.t += 0.01
            self._advance()
            return
        self._emit(self.frame(step))

    def _emit(self, frame: Frame) -> None:
        frame = type(frame)(*([self.t, self.seq] + [getattr(frame, f) for f in frame.__slots__[2:]]))  # type: ignore[attr-defined]
        if self.angel:
            if self.cycle is not None:
                frame = dataclasses.replace(frame, seq=self.cycle[self.seq % len(self.cycle)])
            one = self.angel_enc.encode(frame)
            if self.low_bits:
                one = _low_bits(one)
            self.lines.append(f"{self.t:.3f} < hex:{(one * self.copies).hex()}")
            self.t += 1.0
            self.seq = (self.seq + 1) % 256
            return
        data = self.enc.encode(frame)
        self.lines.append(f"{self.t:.3f} < {data[:-2].decode('ascii')}")
        self._advance()

    def _advance(self) -> None:
        self.t += 1.0
        self.seq = (self.seq + 1) % 65536


def _low_bits(message: bytes) -> bytes:
    """An Angel Eye message with bit 7 of its data bytes clear, its BCC
    worked out again."""
    if message[2:3] not in (b"D", b"d", b"G", b"E", b"e", b"L"):
        return message
    body = message[1:3] + bytes(b & 0x7F for b in message[3:-3]) + b"\x03"
    bcc = 0
    for b in body:
        bcc ^= b
    return b"\x05" + body + b"%02X" % bcc


# Coups for the Angel Eye captures (P: Player's cards, B: Banker's, in order).
ANGEL_NATURAL = "P:9S,KH B:2C,3D"  # Player natural 9
ANGEL_TIE = "P:6S,KH B:6C,QD"  # both stand on 6
ANGEL_PLAYER_THIRD = "P:2H,3C,4D B:KS,7H"  # Player draws (P3: target 0x83, never ETX); Banker stands on 7
ANGEL_BANKER_THIRD = "P:4S,2D B:3H,2S,9C"  # Player stands on 6, Banker draws on 5 (B3: 0x93)
ANGEL_PAIR = "P:8H,8D B:7S,KD"  # Player pair; Banker wins 7 to 6
ANGEL_BOTH_THIRD = "P:AS,2S,5H B:QC,5C,2C"  # Player draws a 5, Banker on 5 draws
ANGEL_BANKER_WINS_THIRD = "P:KC,QH,3S B:JD,4D,AH"  # Player draws a 3, Banker on 4 draws


SCENARIOS: dict[str, tuple[dict[str, str], str]] = {
    # --- the shoe procedure ---
    "burn_first_card": (
        {},
        "HELLO\nBTN NEWSHOE\nCARD KD\n"
        + "\n".join(f"CARD {r}C" for r in "23456789TJ")
        + "\nCOUP 9S 2C KH 3D",
    ),
    "burn_decks": (
        {"decks": "6", "burn": "decks"},
        "HELLO\nBTN NEWSHOE\nCARD 9H\n" + "\n".join(f"CARD {r}C" for r in "234567") + "\nCOUP 9S 2C KH 3D",
    ),
    "cut_card_one_more": (
        {},
        "START\nCOUP 9S 2C KH 3D\nCUT\nCOUP 6S 7C KH QD\nCOUP 9D 2D KD 3H\nBTN NEWSHOE",
    ),
    "cut_card_last": ({"after_cut": "last"}, "START\nCARD 6S\nCARD 7C\nCUT\nCARD KH\nCARD QD\nBTN RESULT"),
    "demo_coups": ({"demo_coups": "2"}, "START\nCOUP 9S 2C KH 3D\nCOUP 6S 7C KH QD\nCOUP TS 7C KH QD 4H"),
    "face_up_card": ({}, "START\nCARD 9S F\nCARD 2C\nCARD KH\nCARD 3D\nBTN RESULT"),
    "coded_decks": ({}, "START\nCARD 9S - 1\nCARD 2C - 8\nCARD KH - 3\nCARD 3D - 2\nBTN RESULT"),
    # --- profiles ---
    "profile_punto_banco": (
        {"profile": "punto_banco"},
        "START\nCOUP 9S 2C KH 3D\nCOUP 6S 7C KH QD\nCOUP TS AS AC AD QH KD\nCOUP 4S 4C 3S 3C",
    ),
    "profile_ez_baccarat": (
        {"profile": "ez_baccarat"},
        "START\nCOUP TS 3C KH AD 5C 3H\nCOUP 2S 6C 3S KC 3D\nCOUP 6S 7C KH QD",
    ),
    "profile_baccarat_27": (
        {"profile": "baccarat_27"},
        "START\nCOUP TS AS AC AD QH KD\nCOUP 6S 3C KS 4C\nCOUP 5S 5C 5D 5H KS KC",
    ),
    "auto_boundary": (
        {"coup_boundary": "auto"},
        "START\nCARD 9S\nCARD 2C\nCARD KH\nCARD 3D\nCARD 6S\nCARD 7C\nCARD KH\nCARD QD",
    ),
    # --- Article X, one per code (codes needing a shoe that assigns hands are
    #     in the angel-eye captures) ---
    "x_extra_card": ({}, "START\nCARD 9S\nCARD 2C\nCARD KH\nCARD 3D\nCARD 5D\nBTN RESULT\nCOUP 6S 7C KH QD"),
    "x_missing_result": (
        {},
        "START\nCARD 9S\nCARD 2C\nCARD KH\nCARD 3D\nCARD 8C\nCARD KC\nCARD KD\nCARD 4H\nBTN RESULT"
        "\nCOUP 5H 3S 2D 3C\nCARD 6S\nCARD 7C\nCARD KH\nCARD QD\nCARD 2H\nBTN RESULT\nBTN NEWSHOE",
    ),
    "x_premature_result_corrected": ({}, "START\nCARD TS\nCARD 7C\nCARD KH\nCARD QD\nBTN RESULT\nCARD 4H"),
    "x_premature_result_void": (
        {},
        "START\nCARD TS\nCARD 7C\nCARD KH\nCARD QD\nBTN RESULT\nWAIT 130\nSTAT OK",
    ),
    "x_unread_card": (
        {},
        "START\nCARD XX\nCARD 7C\nCARD KH\nCARD QD\nCARD 4H\nBTN RESULT\nWAIT 130\nSTAT OK\nCOUP 9S 2C KH 3D",
    ),
    "x_sequence_gap": (
        {},
        "START\nCARD 6S\nCARD 7C\nGAP 1\nCARD QD\nBTN RESULT\nWAIT 130\nSTAT OK\nCOUP 9S 2C KH 3D",
    ),
    "x_foreign_card": (
        {"decks": "1"},
        "START\nCARD 6S\nCARD 7C\nCARD 6S\nCARD QD\nBTN RESULT\nCOUP 9S 2C KH 3D",
    ),
    "x_foreign_deck": ({"decks": "6"}, "START\nCARD 6S - 7\nCARD 7C\nCARD KH\nCARD QD\nBTN RESULT"),
    "x_shuffle_mismatch": (
        {"decks": "1"},
        "HELLO\nSHUF "
        + " ".join(r + s for s in "SHDC" for r in "A23456789TJQK")
        + "\nBTN NEWSHOE\nCARD AS\nCARD 2S\nCARD 3S\nCARD 5S\n"
        "CARD 4S\nCARD 6S\nBTN RESULT",
    ),
    "x_shoe_exhausted": ({}, "START\nCARD 6S\nCARD 7C\nSTAT EMPTY"),
    "x_cut_card_overrun": ({"after_cut": "last"}, "START\nCUT\nCOUP 9S 2C KH 3D\nCOUP 6S 7C KH QD"),
    "x_burn_mismatch": (
        {},
        "HELLO\nBTN NEWSHOE\nCARD 5S\nCARD 2C\nBTN RESULT\nCARD 3C\nCARD 4C\nCARD 6C\nCARD 7C\n"
        "COUP 9S 2C KH 3D",
    ),
    "x_device_fault_jam": ({}, "START\nCARD 6S\nCARD 7C\nSTAT JAM\nSTAT OK\nCARD KH\nCARD QD\nBTN RESULT"),
    "x_device_fault_void": ({}, "START\nCARD 6S\nCARD 7C\nSTAT READER_FAULT\nWAIT 130\nSTAT OK"),
    "x_device_restart_mid_coup": (
        {},
        "START\nCARD 6S\nCARD 7C\nHELLO\nCARD KH\nCARD QD\nBTN RESULT\nWAIT 130\nSTAT OK",
    ),
    # --- Angel Eye: the shoe places cards and announces results itself ---
    "angel_eye_coup": (
        {"protocol": "angel-eye/2"},
        "LOWBITS\nHELLO\nCARD 3S first\nCARD 4C burn\nCARD 5D burn\n"
        "CARD 6H burn\nCARD 9S P1\nCARD 2C B1\nCARD KH P2\nCARD 3D B2\nRESULT player\n"
        "CARD 6S P1\nCARD 6C B1\nCARD KH P2\nCARD QD B2\nRESULT tie",
    ),
    "x_wrong_hand": (
        {"protocol": "angel-eye/2"},
        "LOWBITS\nHELLO\nCARD 3S first\nCARD 4C burn\nCARD 5D burn\n"
        "CARD 6H burn\nCARD 9S P1\nCARD 2C P2\nCARD KH B1\nCARD 3D B2\nRESULT player\nWAIT 130\n"
        "CARD 6S P1\nCARD 7C B1\nCARD KH P2\nCARD QD B2\nRESULT banker",
    ),
    "x_shoe_disagrees": (
        {"protocol": "angel-eye/2"},
        "LOWBITS\nHELLO\nCARD 3S first\nCARD 4C burn\nCARD 5D burn\n"
        "CARD 6H burn\nCARD 9S P1\nCARD 2C B1\nCARD KH P2\nCARD 3D B2\nRESULT banker\n"
        "CARD 6S P1\nCARD 7C B1\nCARD KH P2\nCARD QD B2\nRESULT banker",
    ),
    # --- Angel Eye as real shoes send it: a seq cycle of characters, bit 7 set
    #     (built like the public C# integration's test frames; see above) ---
    "angel_eye_cycle_0_9": (
        {"protocol": "angel-eye/2"},
        "CYCLE 0123456789\nONCE\nHELLO\nCARD 3S first\nCARD 4C burn\nCARD 5D burn\nCARD 6H burn\n"
        + "\n".join(
            f"COUP {c}\nBTN STANDBY"
            for c in (ANGEL_NATURAL, ANGEL_TIE, ANGEL_PLAYER_THIRD, ANGEL_BANKER_THIRD, ANGEL_PAIR)
        ),
    ),
    "angel_eye_cycle_0_F": (
        {"protocol": "angel-eye/2"},
        "CYCLE 0123456789ABCDEF\nHELLO\nCARD 3S first\nCARD 4C burn\nCARD 5D burn\nCARD 6H burn\n"
        f"COUP {ANGEL_PAIR}\nBTN STANDBY\nSTAT LOCKED\nSTAT UNLOCKED\nCOUP {ANGEL_BOTH_THIRD}\n"
        "STAT ERROR button mishandled (in error mode)\nSTAT OK error cleared: button mishandled\n"
        f"BTN STANDBY\nCOUP {ANGEL_BANKER_WINS_THIRD}\nBTN STANDBY\nCOUP {ANGEL_NATURAL}\n"
        f"BTN STANDBY\nCOUP {ANGEL_PLAYER_THIRD}\nBTN STANDBY\nCOUP {ANGEL_TIE}",
    ),
    "angel_eye_cycle_1_F": (
        {"protocol": "angel-eye/2"},
        "CYCLE 123456789ABCDEF\nHELLO\nCARD 3S first\nCARD 4C burn\nCARD 5D burn\nCARD 6H burn\n"
        f"COUP {ANGEL_PLAYER_THIRD}\nBTN STANDBY\nCOUP {ANGEL_BANKER_THIRD}\nBTN STANDBY\n"
        f"COUP {ANGEL_BOTH_THIRD}\nBTN STANDBY\nCUT\nCOUP {ANGEL_NATURAL}\nBTN STANDBY\n"
        f"COUP {ANGEL_BANKER_WINS_THIRD}\nBTN STANDBY",
    ),
    # --- loss recovery: frames lost on the line, held frames, coup numbering
    #     (each once pinned only by a unit test that builds frames in code;
    #     the sequence numbers are those of that test: START1 is 0-3) ---
    "loss_newshoe_while_held": (
        {},
        "START1\nCARD 9S\nGAP 1\nCARD TS\nCARD QH\nBTN RESULT\nCOUP 8D 2C KD 5C\nCOUP 7H 7D TC JS\n"
        "BTN NEWSHOE",
    ),
    "loss_during_burn": (
        {},
        "HELLO\nBTN NEWSHOE\nCARD AS\nGAP 2\nCARD KH\nCARD TS\nCARD QH\nBTN RESULT\n"
        "COUP 6C AC 4C TD JD 2D\nCOUP AH QD 5H JH 7H\nWAIT 130\nSTAT OK",
    ),
    "loss_after_held_coup_voided": (
        {},
        "START1\nCARD 9S\nGAP 1\nCARD TS\nCARD QH\nGAP 8\nWAIT 130\nCARD 3D\nCARD 2C\nCARD 5C\n"
        "CARD 7S\nBTN RESULT",
    ),
    "loss_result_of_void_coup": (
        {},
        "START1\nCARD 5H\nCARD JC\nCARD 4C\nCARD 2H - 9\nGAP 1\nCOUP JS 5D 9H QS\nCOUP 8D 2C KD 5C\n"
        "WAIT 130\nSTAT OK",
    ),
    "loss_whole_coup_numbering_lost": (
        {},
        "START1\nCOUP 9S KH TS QH\nCOUP 8D 2C KD 5C\nGAP 5\nCOUP 7H 7D TC JS\nWAIT 130\n"
        "COUP 8C 3H KC 4H\nBTN NEWSHOE",
    ),
    # (coup 3's deadline, already past when coup 1's releases the frames it
    # held, fires at the next frame: hence the second STAT OK)
    "loss_second_result_released_late": (
        {},
        "START1\nCARD 9S\nGAP 1\nCARD TS\nCARD QH\nBTN RESULT\nCARD KC\nCARD 9C\nCARD QC\nCARD 4C\n"
        "BTN RESULT\nCARD 8D\nGAP 1\nCOUP KH JD 8S 4H\nCOUP TC AH 6C 2C QH\nCOUP 7S 2S 4C TC TH 3D\n"
        "WAIT 130\nSTAT OK\nWAIT 1\nSTAT OK",
    ),
    "loss_result_then_extra_card": (
        {},
        "START1\nCARD 9S\nCARD KH\nCARD TS\nCARD QH\nGAP 1\nCOUP 3C JC 8D 2H QD 4H 7H\nCOUP 8C 3H KC 4H\n"
        "WAIT 130\nSTAT OK",
    ),
    "loss_result_while_unread_holds": (
        {},
        "START1\nCARD 8H\nCARD XX\nCARD 2D\nCARD 3C\nCARD 9C\nCARD 6H\nGAP 1\nCOUP 7D QC JS 5H 2H\n"
        "COUP 8C 3H KC 4H\nWAIT 130\nSTAT OK",
    ),
    "loss_result_after_unread_may_complete": (
        {},
        "START1\nCARD XX\nCARD 9C\nCARD KC\nCARD 6C\nGAP 1\nCOUP 3S 4D QC QH 8D\nCOUP 8C 3H KC 4H\n"
        "WAIT 130\nSTAT OK",
    ),
    "loss_newshoe_lost": (
        {},
        "START1\nCOUP 9S KH TS QH\nCUT\nCOUP 8D 2C KD 5C\nCOUP 7H 7D TC JS\nGAP 2\nCARD 4S\nCARD 5S\n"
        "COUP 8C 3H KC 4H\nBTN NEWSHOE\nWAIT 130\nSTAT OK",
    ),
    "loss_lost_result_keeps_numbers": (
        {},
        "START1\nCARD 9S\nCARD KH\nCARD TS\nCARD QH\nGAP 1\nCOUP 8D KD TD QD\nCOUP 8C 9C KC QC",
    ),
    "loss_lost_extra_card_opens_no_coup": (
        {},
        "START1\nCARD 9S\nCARD KH\nCARD TS\nCARD QH\nGAP 1\nBTN RESULT\nCOUP 8D KD TD QD",
    ),
    "loss_gap_while_held": (
        {},
        "START1\nCARD 9S\nGAP 1\nCARD TS\nCARD QH\nBTN RESULT\nCARD 8C\nGAP 1\nCARD 8H\nCARD JS\n"
        "CARD 9S\nBTN RESULT\nWAIT 130\nSTAT OK\nWAIT 1\nSTAT OK",
    ),
    "loss_held_coup_result_lost": (
        {},
        "START1\nCARD JH\nCARD QC\nCARD 8H\nGAP 2\nCOUP 9S KH TS QH\nCOUP 8D KD TD QD\nWAIT 130\nSTAT OK",
    ),
    "loss_gap_on_void_coup": ({}, "START1\nCARD 9S - 9\nGAP 1\nCARD 5S\nBTN RESULT\nWAIT 1000\nSTAT OK"),
    "loss_newshoe_voids_held_last_coup": (
        {"after_cut": "last"},
        "START1\nCUT\nCARD 3H\nGAP 1\nBTN RESULT\nBTN NEWSHOE",
    ),
    "loss_newshoe_voids_held_coup_and_next": (
        {},
        "START1\nCARD 3H\nGAP 1\nBTN RESULT\nCARD 4H\nBTN NEWSHOE",
    ),
    "loss_held_cards_of_void_last_coup_shown": (
        {"after_cut": "last"},
        "START1\nCUT\nCARD XX\nCARD XX\nCARD XX\nCARD 3H\nCARD 4H\nCARD 5H\nCARD 6H\nBTN RESULT\n"
        "WAIT 1000\nSTAT OK",
    ),
    # --- unread cards and early RESULTs that hold a coup's frames ---
    "hold_early_result_unread": (
        {},
        "START1\nCARD AC\nCARD KC\nCARD XX\nCARD QS\nBTN RESULT\nCARD 4D\nCARD 4H\nBTN RESULT\n"
        "COUP 9H KD 2H 6S AD\nWAIT 130\nSTAT OK",
    ),
    "hold_unread_cannot_change_tableau": (
        {},
        "START1\nCARD XX\nCARD 9C\nCARD KS\nCARD KH\nBTN RESULT\nCOUP 8D KD TD QD\nWAIT 130\nSTAT OK",
    ),
    "hold_result_before_four_cards": ({}, "START1\nCARD 9S\nCARD KH\nCARD TS\nBTN RESULT\nCOUP 8D KD TD QD"),
    "hold_extra_card_after_early_result": (
        {},
        "START1\nCOUP AC 2S 3S TD\nCOUP JH 2D JD\nCOUP 9S KH TS QH",
    ),
    "hold_void_coup_early_result_due_card": (
        {},
        "START1\nCARD 5C\nCARD 2H - 9\nCARD TS\nCARD 3S\nBTN RESULT\nCARD TH\nBTN RESULT\n"
        "COUP 9S KH TS QH\nCOUP 8C 3H KC 4H\nWAIT 130\nSTAT OK",
    ),
    "hold_void_coup_early_result_told_by_tableau": (
        {},
        "START1\nCARD 5C\nCARD 2H - 9\nCARD TS\nCARD 3S\nBTN RESULT\nCARD TH\n"
        "COUP 9S KH TS QH\nCOUP 8C 3H KC 4H\nWAIT 130\nSTAT OK",
    ),
    "hold_void_coup_early_result_either_way": (
        {},
        "START1\nCARD 5C\nCARD 2H - 9\nCARD TS\nCARD 3S\nBTN RESULT\nCOUP 2S 9C KD 7H 8C\nWAIT 130\nSTAT OK",
    ),
    # (the overrun coup 2, void, has its RESULT with P3 due; no second RESULT
    # comes in the eight cards after it, so coup 3's first card may be its
    # due card, but coup 3 is void already, an overrun too)
    "hold_void_coup_early_result_next_void": (
        {"after_cut": "last"},
        "START\nCUT\nCOUP 9S 2C KH 3D\nCOUP TS 7C KH QD\nCARD 9D\nCARD 2S\nCARD KC\nCARD 3H\n"
        "CARD 9H\nCARD 2H\nCARD KD\nCARD 3S\nBTN RESULT",
    ),
    "x_foreign_copy_one_deck": (
        {"decks": "1"},
        "START1\nCARD AH - 2\nCARD KH\nCARD TS\nCARD QH\nBTN RESULT\nCARD AH - 1\nCARD KC\nCARD 9S\n"
        "CARD QC\nBTN RESULT",
    ),
    # --- moves of the engine's state tables (controller/engine/machine.py)
    #     that no other capture takes; SHOWS names each one ---
    "move_first_card_unread_void": (
        {},
        "HELLO\nBTN NEWSHOE\nCARD XX\nCARD 4C\nCARD 5D\nWAIT 130\nSTAT OK\nCOUP 9S 2C KH 3D",
    ),
    "move_newshoe_during_burn": (
        {},
        "HELLO\nBTN NEWSHOE\nCARD 5S\nCARD 4C\nBTN NEWSHOE\nCARD 3S\nCARD 4D\nCARD 5D\nCARD 6H\n"
        "COUP 9S 2C KH 3D",
    ),
    "move_early_result_while_flagged": (
        {},
        "START\nCARD TS\nCARD 7C\nSTAT JAM\nCARD KH\nCARD QD\nBTN RESULT\nSTAT OK\nCARD 4H\nBTN RESULT\n"
        "COUP 9S 2C KH 3D",
    ),
    # (a JAM after the early RESULT: the due card corrects the early
    # RESULT while the device's fault is still open; STAT OK clears it)
    "move_early_result_due_card_while_flagged": (
        {},
        "START\nCARD TS\nCARD 7C\nCARD KH\nCARD QD\nBTN RESULT\nSTAT JAM\nCARD 4H\nSTAT OK\nBTN RESULT\n"
        "COUP 9S 2C KH 3D",
    ),
    "move_gap_after_early_result": (
        {},
        "START\nCARD TS\nCARD 7C\nCARD KH\nCARD QD\nBTN RESULT\nGAP 1\nCARD 4H\nBTN RESULT\nWAIT 130\n"
        "STAT OK\nCOUP 9S 2C KH 3D",
    ),
    # (the unread due card cannot change the tableau, Banker 7 standing, so
    # the second RESULT closes the coup still early; never entered, it is
    # void at the deadline, and coup 2 is settled at once)
    "move_early_result_closed": (
        {},
        "START\nCARD TS\nCARD 7C\nCARD KH\nCARD QD\nBTN RESULT\nCARD XX\nBTN RESULT\n"
        "COUP 9S 2C KH 3D\nWAIT 130\nSTAT OK",
    ),
    # --- the line: garbage, split frames, bad checksums ---
    "line_garbage": (
        {},
        "GARBAGE noise before\nSTART\nGARBAGE \x01\x02junk\nCARD 9S\nGARBAGE $SH,zz\nCARD 2C\n"
        "CARD KH\nGARBAGE ********\nCARD 3D\nBTN RESULT",
    ),
    "line_split_frames": (
        {},
        "START\nSPLIT 2 CARD 9S\nSPLIT 5 CARD 2C\nSPLIT 40 CARD KH\nCARD 3D\nSPLIT 3 BTN RESULT",
    ),
    "line_bad_checksum": (
        {},
        "START\nCARD 6S\nBADCK CARD 7C\nCARD KH\nCARD QD\nBTN RESULT\nWAIT 130\nSTAT OK",
    ),
}


#: The move of a state table (``controller.engine.machine``: a coup's
#: ``from -> to``, or a shoe's ``phase on cause``) each ``move_`` capture
#: was written to show, written into its header; ``tests/
#: test_engine_transitions.py`` checks the capture takes it.
SHOWS: dict[str, tuple[str, ...]] = {
    "move_first_card_unread_void": (
        "shoe: burn on 'first card unread'",
        "shoe: burn-unknown on 'frames lost during the burn'",
    ),
    "move_newshoe_during_burn": ("shoe: burn on 'shoe ends'",),
    "move_early_result_while_flagged": ("coup: flagged -> early-result",),
    "move_early_result_due_card_while_flagged": ("coup: early-result -> flagged",),
    "move_gap_after_early_result": ("coup: early-result -> held",),
    "move_early_result_closed": ("coup: early-result -> closed",),
}


def build(name: str) -> str:
    meta, script = SCENARIOS[name]
    w = _Writer({"protocol": "shoe-ascii/1", "table": "T01", **meta})
    if w.angel:
        w.lines[0] = "# " + " ".join(f"{k}={v}" for k, v in {"table": "T01", **meta}.items())
    w.lines.insert(1, f"# scenario: {name}")
    for i, move in enumerate(SHOWS.get(name, ())):
        w.lines.insert(2 + i, f"# shows the move {move}")
    for step in _expand(script):
        w.step(step)
    return "\n".join(w.lines) + "\n"


def main() -> None:
    for name in SCENARIOS:
        (HERE / f"{name}.shoelog").write_text(build(name), encoding="utf-8")
    print(f"wrote {len(SCENARIOS)} captures to {HERE}")


if __name__ == "__main__":
    main()
