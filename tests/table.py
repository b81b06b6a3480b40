"""Test helper: a scripted table that feeds frames to an engine and keeps
what came out. Frames get increasing timestamps and sequence numbers."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from controller.engine import Engine
from controller.rules import Profile, load_profile
from firmware_protocols.frames import Button, Card, CutCard, Frame, Hello, SequenceGap, Status

T0 = 1_763_800_000.0


@lru_cache(maxsize=64)
def _profile(name: str, rules: tuple[tuple[str, Any], ...]) -> Profile:
    return load_profile(name, dict(rules) or None)


class Table:
    def __init__(
        self, profile: str = "punto_banco", decks: int = 8, table: str = "T01", **rules: Any
    ) -> None:
        self.engine = Engine(table, _profile(profile, tuple(sorted(rules.items()))), decks)
        self.t = T0
        self.seq = 0
        self.events: list[dict[str, Any]] = []

    def _next(self, dt: float = 1.0) -> tuple[float, int]:
        self.t += dt
        self.seq += 1
        return self.t, self.seq

    def feed(self, frame: Frame) -> list[dict[str, Any]]:
        out = self.engine.feed(frame)
        self.events.extend(out)
        return out

    def hello(self) -> list[dict[str, Any]]:
        t, _ = self._next()
        self.seq = 0
        return self.feed(Hello(t, 0, "TEST", "1.0", "0001"))

    def card(self, code: str | None, face_up: bool = False, hand: str | None = None) -> list[dict[str, Any]]:
        t, s = self._next()
        return self.feed(Card(t, s, code, face_up=face_up, hand=hand))

    def cards(self, *codes: str | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for c in codes:
            out += self.card(c)
        return out

    def button(self, name: str) -> list[dict[str, Any]]:
        t, s = self._next()
        return self.feed(Button(t, s, name))

    def result(self) -> list[dict[str, Any]]:
        return self.button("RESULT")

    def new_shoe(self) -> list[dict[str, Any]]:
        return self.button("NEWSHOE")

    def cut(self) -> list[dict[str, Any]]:
        t, s = self._next()
        return self.feed(CutCard(t, s))

    def status(self, code: str) -> list[dict[str, Any]]:
        t, s = self._next()
        return self.feed(Status(t, s, code))

    def gap(self, missing: int = 1) -> list[dict[str, Any]]:
        t, _ = self._next()
        self.seq += missing
        return self.feed(SequenceGap(t, self.seq, self.seq - missing, missing))

    def tick(self, dt: float) -> list[dict[str, Any]]:
        self.t += dt
        out = self.engine.tick(self.t)
        self.events.extend(out)
        return out

    def command(self, **cmd: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self.t += 1
        cmd.setdefault("id", "c1")
        reply, out = self.engine.command(cmd, self.t)
        self.events.extend(out)
        return reply, out

    def start(self, first: str = "AS", burn: tuple[str, ...] = ("2C",)) -> None:
        """HELLO, NEWSHOE, then the burn: ``first`` exposed and ``burn`` face down."""
        self.hello()
        self.new_shoe()
        self.cards(first, *burn)

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]

    def last(self, type_: str) -> dict[str, Any]:
        found = self.of_type(type_)
        assert found, f"no {type_} event in {[e['type'] for e in self.events]}"
        return found[-1]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
