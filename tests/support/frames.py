"""Frames written by hand for engine tests: coups as the dealer deals them
(each card, then the RESULT button), numbered from a given sequence number."""

from __future__ import annotations

from controller.engine import Engine
from controller.rules import load_profile
from firmware_protocols.frames import Button, Card, Frame

#: The tests' clock: 2025-11-22, a time with nothing special about it.
T0 = 1_763_800_000.0


def coup_frames(coups: list[list[str | None]], seq: int, t: float = T0) -> list[Frame]:
    """Each coup's cards in dealing order, then the dealer's RESULT."""
    out: list[Frame] = []
    for cards in coups:
        for card in cards:
            out.append(Card(t, seq, card))
            seq += 1
        out.append(Button(t, seq, "RESULT"))
        seq += 1
    return out


def engine(*, odds: bool = False) -> Engine:
    """Table T01, punto banco, 8 decks, a 2 s correction deadline."""
    return Engine("T01", load_profile("punto_banco", {"correction_deadline_s": 2.0}), 8, odds=odds)
