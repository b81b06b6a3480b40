"""Fuzz target: supervisor command payloads (docs/operations.md, MQTT) through the
parser, and the valid ones into a live engine mid-shoe.

Input: one byte choosing the table's state (low nibble: a coup waiting for
an unread card, frames held after a sequence gap, a premature RESULT, a
jammed device, a card on the wrong hand, an unread burn card, a coup after
the cut card, a shoe that ended, no shoe at all; high bits: 1, 61 or 130 s
between commands), then payloads separated by newlines. The session then goes on
(more cards, a RESULT, a tick past every deadline) and is closed.

Invariants:

- ``parse_command`` raises nothing but ``CommandError``; a parsed command
  matches the published command schema (``controller/schemas/command.json``),
  keeps the id and cmd it was sent with, and its error reply (for one that
  does not parse) is JSON;
- ``Engine.command`` never raises; its reply echoes the id; a command that
  cannot apply changes nothing; every event keeps the contract
  (``fuzz.invariants``), and after the session nothing is left hanging.
"""

from __future__ import annotations

import json
import sys

from fuzz import _harness

with _harness.instrumented():
    import jsonschema

    from controller.commands_schema import Command, CommandError, command_dict, error_reply, parse_command
    from controller.contract import event_schema
    from firmware_protocols.frames import Button, Card, CutCard, Frame, Hello, SequenceGap, Status
    from fuzz import corpus
    from fuzz.invariants import EngineChecker, make_engine

T0 = 1_763_800_000.0
TOKENS = [
    b'{"id":1,"cmd":"enter_card","coup":1,"card":"9H"}',
    b'{"id":"a","cmd":"accept","coup":1}',
    b'{"id":2,"cmd":"void","coup":1,"reason":"x"}',
    b'{"id":3,"cmd":"new_shoe"}',
    b'{"id":4,"cmd":"end_shoe"}',
    b'"coup":2',
    b'"card":"10d"',
    b'"id":',
    b"\n",
    b"\\u0000",
    b"1e999",
    b"NaN",
]

_command_schema = jsonschema.Draft202012Validator(event_schema("command"))


class CommandInvariantError(AssertionError):
    pass


class _Script:
    """Frames with increasing times and sequence numbers."""

    def __init__(self) -> None:
        self.t = T0
        self.seq = 0
        self.frames: list[Frame] = []

    def _next(self) -> tuple[float, int]:
        self.t += 1.0
        self.seq += 1
        return self.t, self.seq

    def hello(self) -> _Script:
        t, _ = self._next()
        self.seq = 0
        self.frames.append(Hello(t, 0, "FUZZ", "1.0", "0001"))
        return self

    def cards(self, *codes: str | None, hand: str | None = None) -> _Script:
        for code in codes:
            t, s = self._next()
            self.frames.append(Card(t, s, code, hand=hand))
        return self

    def button(self, name: str) -> _Script:
        t, s = self._next()
        self.frames.append(Button(t, s, name))
        return self

    def status(self, code: str) -> _Script:
        t, s = self._next()
        self.frames.append(Status(t, s, code))
        return self

    def cut(self) -> _Script:
        t, s = self._next()
        self.frames.append(CutCard(t, s))
        return self

    def gap(self, missing: int) -> _Script:
        t, _ = self._next()
        self.seq += missing
        self.frames.append(SequenceGap(t, self.seq, self.seq - missing, missing))
        return self


def _shoe() -> _Script:
    # first card 2: two burned
    return _Script().hello().button("NEWSHOE").cards("2S", "KD", "QC")


SCENARIOS: list[_Script] = [
    _shoe().cards(None, "3H", "4D", "5C"),  # 0: UNREAD_CARD awaiting enter_card
    _shoe().cards("3H", "4D").gap(2).cards("6S", "2C").button("RESULT"),  # 1: held after a gap
    _shoe().cards("3H", "4D", "TC").button("RESULT"),  # 2: PREMATURE_RESULT
    _shoe().cards("3H", "4D").status("JAM"),  # 3: DEVICE_FAULT
    _shoe().cards("3H").cards("4D", hand="P2"),  # 4: WRONG_HAND
    _Script().hello().button("NEWSHOE").cards(None, "KD"),  # 5: the burn card unread
    _shoe().cards("9H", "9D", "TH", "TD").button("RESULT").cut().cards("AH", "AD"),  # 6: after the cut
    _shoe().cards("9H", "9D", "TH", "TD").button("RESULT").status("EMPTY"),  # 7: shoe ended
    _Script().hello(),  # 8: no shoe
]

TAIL = ("7H", "8D", "9C", "KS", "AH")
#: seconds between commands (high bits of the first byte): some pass the
#: correction deadline (120 s)
SPACING = (1.0, 1.0, 61.0, 130.0)


def check_parsed(payload: bytes, parsed: Command) -> None:
    cmd = command_dict(parsed)
    errors = sorted(_command_schema.iter_errors(cmd), key=str)
    if errors:
        raise CommandInvariantError(f"parsed {payload!r} to {cmd!r}, outside the command schema: {errors[0]}")
    sent = json.loads(payload)
    if cmd["id"] != sent["id"] or cmd["cmd"] != sent["cmd"]:
        raise CommandInvariantError(f"parsed {payload!r} to {cmd!r}: id or cmd changed")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    script = SCENARIOS[(data[0] & 0x0F) % len(SCENARIOS)]
    spacing = SPACING[data[0] >> 6]
    checker = EngineChecker(make_engine("punto_banco", 8))
    for frame in script.frames:
        checker.feed(frame)
    t = script.t
    seq = script.seq
    for payload in data[1:].split(b"\n")[:16]:
        t += spacing
        try:
            cmd = parse_command(payload)
        except CommandError as exc:
            json.dumps(error_reply(exc, payload))
            continue
        check_parsed(payload, cmd)
        checker.command(cmd, t)
    for code in TAIL:
        t += 1.0
        seq += 1
        checker.feed(Card(t, seq, code))
    seq += 1
    checker.feed(Button(t + 1.0, seq, "RESULT"))
    checker.finish(t + 100_000.0)


if __name__ == "__main__":
    _harness.main(test_one_input, corpus.command_seeds, TOKENS, sys.argv)
