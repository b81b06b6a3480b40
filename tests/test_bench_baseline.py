"""The replay benchmark's yardstick (benchmarks/baseline_replay.py) must do
the work it is credited with: its coups and card positions are the
engine's on the same captures, and it refuses a frame with a bad checksum,
a lost frame, a card the tableau does not call for and a RESULT before a
due card rather than replaying past them. No timings here (benchmarks/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.baseline_replay import BaselineError, replay
from benchmarks.bench_replay import make_capture
from controller.replay import replay_events

CAPTURES = Path(__file__).parent / "captures"


def _coup(c: dict[str, Any]) -> tuple[Any, ...]:
    keys = ("shoe", "coup", "winner", "natural", "player_pair", "banker_pair")
    hands = tuple((c[h]["cards"], c[h]["total"]) for h in ("player", "banker"))
    return (*(c[k] for k in keys), *hands)


def _card(c: dict[str, Any]) -> tuple[Any, ...]:
    keys = ("v", "type", "table", "shoe", "ts", "coup", "position", "card", "value", "face_up")
    return tuple(c[k] for k in keys)


def _both(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    docs: list[str] = []
    coups = replay(str(path), docs.append)
    cards = [d for d in map(json.loads, docs) if d["type"] == "card"]
    return coups, cards, list(replay_events(path))


@pytest.mark.parametrize(
    "make",
    [
        lambda d: CAPTURES / "profile_punto_banco.shoelog",
        lambda d: (make_capture(d / "fake.shoelog", shoes=3, seed=7), d / "fake.shoelog")[1],
    ],
    ids=["corpus-punto-banco", "fake-3-shoes"],
)
def test_the_baseline_settles_every_coup_and_places_every_card_as_the_engine_does(make, tmp_path):
    path = make(tmp_path)
    coups, cards, events = _both(path)
    engine_coups = [e for e in events if e["type"] == "coup.result"]
    engine_cards = [e for e in events if e["type"] == "card"]
    assert len(coups) >= 3
    assert [_coup(c) for c in coups] == [_coup(c) for c in engine_coups]
    assert [_card(c) for c in cards] == [_card(c) for c in engine_cards]


def _lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "clean.shoelog"
    make_capture(path, shoes=1, seed=3)
    return path.read_text().splitlines()


def _frame(line: str) -> bytes:
    return bytes.fromhex(line.split(" ", 2)[2][4:])


def _rewrite(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "edited.shoelog"
    path.write_text("\n".join(lines) + "\n")
    return path


def _index(lines: list[str], what: bytes, nth: int = 0) -> int:
    hits = [i for i, line in enumerate(lines) if not line.startswith("#") and what in _frame(line)]
    return hits[nth]


def test_the_baseline_refuses_a_frame_whose_checksum_is_wrong(tmp_path):
    lines = _lines(tmp_path)
    i = _index(lines, b",CARD,", 10)
    raw = bytearray(_frame(lines[i]))
    raw[-3] ^= 0x01  # the checksum's last hex digit, "0"<->"1", "A"<->"@" ...
    t, d, _ = lines[i].split(" ", 2)
    lines[i] = f"{t} {d} hex:{bytes(raw).hex()}"
    with pytest.raises(BaselineError, match="bad frame"):
        replay(str(_rewrite(tmp_path, lines)), lambda s: None)


def test_the_baseline_refuses_a_lost_frame(tmp_path):
    lines = _lines(tmp_path)
    del lines[_index(lines, b",CARD,", 10)]
    with pytest.raises(BaselineError, match="lost frame"):
        replay(str(_rewrite(tmp_path, lines)), lambda s: None)


@pytest.mark.parametrize(
    ("fault", "refusal"),
    [("extra:1", "a card after the tableau is complete"), ("premature:1", "RESULT before the tableau")],
)
def test_the_baseline_refuses_a_coup_dealt_against_the_tableau(fault, refusal, tmp_path):
    path = tmp_path / "fault.shoelog"
    make_capture(path, shoes=1, seed=5, faults=fault)
    with pytest.raises(BaselineError, match=refusal):
        replay(str(path), lambda s: None)
