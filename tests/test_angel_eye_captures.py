"""Angel Eye as real shoes send it (docs/devices.md, Angel Eye): the captures
built like the public C# integration's test frames (``tests/captures/
angel_eye_cycle_*``: seq cycles '0'-'9', '0'-'F' and '1'-'F', bit 7 set on
every data byte) replay with every coup settled and no gap; a real gap in
such a stream is still found, counted where the count is proven, and a loss
of unknown size is never settled on a guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.engine import Engine
from controller.events import Event
from controller.replay import replay_events
from controller.rules import load_profile
from firmware_protocols.frames import Card, CutCard, DeviceResult, Frame, Hello, SequenceGap, Status

CAPTURES = Path(__file__).parent / "captures"
CYCLE_CAPTURES = ["angel_eye_cycle_0_9", "angel_eye_cycle_0_F", "angel_eye_cycle_1_F"]


def records(name: str) -> tuple[list[str], list[tuple[float, str]]]:
    """A capture's ``#`` lines, and its ``(t, payload)`` records."""
    head: list[str] = []
    recs: list[tuple[float, str]] = []
    for line in (CAPTURES / f"{name}.shoelog").read_text().splitlines():
        if line.startswith("#"):
            head.append(line)
        else:
            t, _, payload = line.split(" ", 2)
            recs.append((float(t), payload))
    return head, recs


def replay(tmp_path: Path, head: list[str], recs: list[tuple[float, str]]) -> list[Event]:
    path = tmp_path / "stream.shoelog"
    path.write_text("\n".join(head + [f"{t:.3f} < {p}" for t, p in recs]) + "\n")
    return list(replay_events(path))


@pytest.mark.parametrize("name", CYCLE_CAPTURES)
def test_integration_style_captures_settle_every_coup_with_no_sequence_gap(name: str) -> None:
    events = list(replay_events(CAPTURES / f"{name}.shoelog"))
    results = [e["coup"] for e in events if e["type"] == "coup.result"]
    assert results == list(range(1, len(results) + 1)) and len(results) >= 5
    assert [e for e in events if e["type"] in ("misdeal", "coup.void", "security.alert")] == []
    assert all(r["corrections"] == [] for r in events if r["type"] == "coup.result")


def test_the_cycle_captures_wrap_their_cycles_and_have_the_integrations_bit_7() -> None:
    for name, cycle in zip(
        CYCLE_CAPTURES, ("0123456789", "0123456789ABCDEF", "123456789ABCDEF"), strict=True
    ):
        _, recs = records(name)
        messages = [bytes.fromhex(p[4:]) for _, p in recs]
        seqs = bytes(m[1] for m in messages)
        assert set(seqs) == set(cycle.encode()) and len(seqs) > 2 * len(cycle)
        cards = [m for m in messages if m[2:3] == b"D"]
        assert all(m[3] & 0x80 and m[4] & 0x80 for m in cards)
    # the Player's third card: target 0x83, never ETX
    _, recs = records("angel_eye_cycle_0_9")
    assert any(bytes.fromhex(p[4:])[2:4] == b"D\x83" for _, p in recs)


# Coup 5 of angel_eye_cycle_0_F: P 2H 3C 4D / B KS 7H, its messages 37-42
# (P1 B1 P2 B2 P3 G); its P2 (message 39, seq '7') is lost on the line.
LOST = 39


def paced(recs: list[tuple[float, str]], step: float = 0.06) -> list[tuple[float, str]]:
    """The messages ``step`` seconds apart: as close as a 4800-baud line
    carries them (three copies of 8 bytes: 50 ms)."""
    t0 = recs[0][0]
    return [(t0 + i * step, p) for i, (_, p) in enumerate(recs)]


def with_loss(silence: float) -> list[tuple[float, str]]:
    """angel_eye_cycle_0_F with message 39 lost, ``silence`` seconds more
    before the next, and a pause of 130 s after coup 5 (its deadline)."""
    _, recs = records("angel_eye_cycle_0_F")
    recs = paced(recs)
    out = []
    shift = 0.0
    for i, (t, p) in enumerate(recs):
        if i == LOST:
            shift += silence
            continue
        if i == 43:  # the STANDBY after coup 5
            shift += 130.0
        out.append((t + shift, p))
    return out


def test_a_message_lost_mid_cycle_is_a_sequence_gap_of_the_right_count(tmp_path: Path) -> None:
    head, _ = records("angel_eye_cycle_0_F")
    events = replay(tmp_path, head, with_loss(0.0))
    gaps = [e for e in events if e["type"] == "misdeal" and e["code"] == "SEQUENCE_GAP"]
    assert [(g["coup"], g["action"]) for g in gaps] == [(5, "awaiting_supervisor"), (5, "void")]
    assert "expected sequence 55, received 56 (1 missing)" in gaps[0]["detail"]  # '7' lost, '8' came
    # coup 5 is never settled on a guess; the count is exact, so the coups
    # after it keep their numbers
    assert [r["coup"] for r in events if r["type"] == "coup.result"] == [1, 2, 3, 4, 6]
    assert not [a for a in events if a["type"] == "security.alert" and a["code"] == "COUP_NUMBERING_LOST"]


def test_a_message_lost_in_a_long_silence_is_a_loss_of_unknown_size_and_nothing_after_is_settled(
    tmp_path: Path,
) -> None:
    head, _ = records("angel_eye_cycle_0_F")
    events = replay(tmp_path, head, with_loss(10.0))
    gaps = [e for e in events if e["type"] == "misdeal" and e["code"] == "SEQUENCE_GAP"]
    assert gaps and gaps[0]["coup"] == 5
    assert "at least 1 missing; how many more is unknown" in gaps[0]["detail"]
    # whole cycles may have gone in 10 s: which coup follows is unknown
    lost = [a for a in events if a["type"] == "security.alert" and a["code"] == "COUP_NUMBERING_LOST"]
    assert [a["coup"] for a in lost] == [5]
    assert "how many is unknown" in lost[0]["detail"]
    assert [r["coup"] for r in events if r["type"] == "coup.result"] == [1, 2, 3, 4]
    assert {v["code"] for v in events if v["type"] == "coup.void"} == {"SEQUENCE_GAP"}


# --- the engine on an Angel Eye's own ways (found by the angel-eye soak) -------

T0 = 1_763_800_000.0


def angel_engine_events(frames: list[Frame], until: float) -> list[Event]:
    e = Engine("T01", load_profile("punto_banco", {"correction_deadline_s": 2.0}), 8)
    return [ev for f in frames for ev in e.feed(f)] + e.tick(until)


def angel_coup(seq: int, player: list[str], banker: list[str], winner: str) -> list[Frame]:
    order = [("P1", player[0]), ("B1", banker[0]), ("P2", player[1]), ("B2", banker[1])]
    order += [("P3", player[2])] if len(player) > 2 else []
    order += [("B3", banker[2])] if len(banker) > 2 else []
    out: list[Frame] = [Card(T0, seq + i, c, hand=h) for i, (h, c) in enumerate(order)]
    out.append(DeviceResult(T0, seq + len(order), winner, False, False))
    return out


def angel_shoe_start(seq: int = 0) -> list[Frame]:
    return [
        Hello(T0, seq, "ANGEL-EYE", "", ""),
        Card(T0, seq + 1, "AS", hand="first"),
        Card(T0, seq + 2, "2S", hand="burn"),
    ]


def test_an_unreadable_first_card_of_a_coup_opens_it_and_keeps_every_later_position() -> None:
    # Coup 2's P1 passes the reader unread: the shoe sends only the error
    # (no D). It is still coup 2's P1: B1 and the rest stay where they are.
    frames = angel_shoe_start() + angel_coup(3, ["9S", "KH"], ["2C", "3D"], "player")
    frames += [
        Status(T0, 8, "ERROR", "unreadable card (in error mode)"),
        Status(T0, 9, "OK", "error cleared: unreadable card"),
    ]
    frames += [Card(T0, 10, "JD", hand="B1"), Card(T0, 11, "KH", hand="P2"), Card(T0, 12, "QD", hand="B2")]
    frames += [Card(T0, 13, "AH", hand="P3"), DeviceResult(T0, 14, "player", False, False)]
    frames += angel_coup(15, ["9D", "QD"], ["8S", "9H"], "player")
    events = angel_engine_events(frames, T0 + 10)
    assert [(c["coup"], c["position"], c["card"]) for c in events if c["type"] == "card" and c["coup"] == 2][
        :2
    ] == [
        (2, "P1", None),
        (2, "B1", "JD"),
    ]
    assert not [m for m in events if m["type"] == "misdeal" and m["code"] == "WRONG_HAND"]
    assert [r["coup"] for r in events if r["type"] == "coup.result"] == [1, 3]
    assert [(v["coup"], v["code"]) for v in events if v["type"] == "coup.void"] == [(2, "UNREAD_CARD")]


def test_a_new_shoes_first_card_after_a_void_last_coup_with_a_card_due_starts_the_new_shoe() -> None:
    # The cut card comes before coup 1's first card: coup 2 is the last. The
    # shoe misplaces coup 2's P2 (WRONG_HAND: void) and sends its result with
    # the tableau still wanting a card; then the next shoe's first card.
    frames = [*angel_shoe_start(), CutCard(T0, 3), *angel_coup(4, ["9S", "KH"], ["2C", "3D"], "player")]
    frames += [Card(T0, 9, "5C", hand="P1"), Card(T0, 10, "4H", hand="B1"), Card(T0, 11, "8S", hand="B2")]
    frames += [Card(T0, 12, "7H", hand="P2"), DeviceResult(T0, 13, "banker", False, False)]
    frames += [Card(T0, 14, "3S", hand="first")] + [
        Card(T0, 15 + i, c, hand="burn") for i, c in enumerate(("4C", "5D", "6H"))
    ]
    frames += angel_coup(18, ["9D", "QD"], ["8S", "9H"], "player")
    events = angel_engine_events(frames, T0 + 10)
    started = [e["shoe"] for e in events if e["type"] == "shoe.started"]
    assert len(started) == 2
    assert not [e for e in events if e.get("code") in ("CUT_CARD_OVERRUN", "BURN_MISMATCH")]
    second = [e for e in events if e["shoe"] == started[1]]
    assert [(r["coup"], r["player"]["cards"]) for r in second if r["type"] == "coup.result"] == [
        (1, ["9D", "QD"])
    ]


def test_a_new_shoes_first_card_while_the_last_coup_holds_frames_after_a_gap_starts_the_new_shoe() -> None:
    # The last coup (the cut card came before coup 1) loses its P2 on the line
    # and its frames are held; its RESULT is lost too. The next shoe's first
    # card is the shoe's own word that a new shoe began: the held coup is
    # void, the new shoe is dealt and settled as usual.
    frames: list[Frame] = [
        *angel_shoe_start(),
        CutCard(T0, 3),
        *angel_coup(4, ["9S", "KH"], ["2C", "3D"], "player"),
    ]
    frames += [Card(T0, 9, "3D", hand="P1"), Card(T0, 10, "4C", hand="B1"), SequenceGap(T0, 12, 11, 1)]
    frames += [Card(T0, 12, "5S", hand="B2")]  # then its RESULT (13) is lost
    frames += [SequenceGap(T0, 14, 13, 1), Card(T0, 14, "AD", hand="first"), Card(T0, 15, "9S", hand="burn")]
    frames += angel_coup(16, ["9D", "QD"], ["8S", "9H"], "player")
    events = angel_engine_events(frames, T0 + 10)
    started = [e["shoe"] for e in events if e["type"] == "shoe.started"]
    assert len(started) == 2
    first = [e for e in events if e["shoe"] == started[0]]
    assert [(v["coup"], v["code"]) for v in first if v["type"] == "coup.void"] == [(2, "SHOE_ENDED")]
    second = [e for e in events if e["shoe"] == started[1]]
    assert [b["first_card"] for b in second if b["type"] == "shoe.burn"] == ["AD"]
    assert [(r["coup"], r["player"]["cards"]) for r in second if r["type"] == "coup.result"] == [
        (1, ["9D", "QD"])
    ]
    assert not [e for e in events if e.get("code") in ("CUT_CARD_OVERRUN", "BURN_MISMATCH", "FOREIGN_CARD")]
