"""Regression corpus (the gpsd way): every ``tests/captures/*.shoelog`` is
replayed and its JSON lines must equal the checked-in
``*.expected.jsonl`` byte for byte.

Expected files are regenerated only on purpose, after reading the diff:
``SHOE_REGEN_CAPTURES=1 .venv/bin/pytest tests/test_captures.py``.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

from controller.events import dumps
from controller.replay import replay_events

HERE = Path(__file__).parent / "captures"
CAPTURES = sorted(HERE.glob("*.shoelog"))
REGEN = os.environ.get("SHOE_REGEN_CAPTURES") == "1"


def render(path: Path) -> str:
    return "".join(dumps(e) + "\n" for e in replay_events(path))


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_capture_replays_to_its_expected_events(capture: Path) -> None:
    expected_path = capture.with_suffix(".expected.jsonl")
    got = render(capture)
    if REGEN:
        expected_path.write_text(got, encoding="utf-8")
    assert expected_path.exists(), f"no {expected_path.name}: regenerate with SHOE_REGEN_CAPTURES=1"
    want = expected_path.read_text(encoding="utf-8")
    if got != want:
        diff = "".join(
            difflib.unified_diff(want.splitlines(True), got.splitlines(True), "expected", "replayed", n=1)
        )
        pytest.fail(f"{capture.name} replays differently:\n{diff[:6000]}")


def test_the_corpus_covers_every_article_x_code_and_procedure() -> None:
    seen_codes: set[str] = set()
    seen_types: set[str] = set()
    for capture in CAPTURES:
        for line in capture.with_suffix(".expected.jsonl").read_text().splitlines():
            ev = json.loads(line)
            seen_types.add(ev["type"])
            if ev["type"] in ("misdeal", "coup.void", "security.alert"):
                seen_codes.add(ev["code"])
    must = {
        "EXTRA_CARD",
        "PREMATURE_RESULT",
        "UNREAD_CARD",
        "SEQUENCE_GAP",
        "FOREIGN_CARD",
        "SHUFFLE_MISMATCH",
        "SHOE_EXHAUSTED",
        "CUT_CARD_OVERRUN",
        "BURN_MISMATCH",
        "DEVICE_FAULT",
        "WRONG_HAND",
        "SHOE_DISAGREES",
    }
    assert must <= seen_codes, f"missing: {sorted(must - seen_codes)}"
    assert {"shoe.started", "shoe.burn", "shoe.cut_card", "shoe.ended", "card", "coup.result"} <= seen_types


def test_every_capture_is_built_by_its_script_and_listed_with_its_rule() -> None:
    from tests.captures.build import SCENARIOS, build

    readme = (HERE / "README.md").read_text(encoding="utf-8")
    names = {p.stem for p in CAPTURES}
    assert names == set(SCENARIOS)
    assert [n for n in sorted(names) if f"`{n}`" not in readme] == []
    for capture in CAPTURES:
        assert capture.read_text(encoding="utf-8") == build(capture.stem), f"{capture.name}: rebuild it"


def test_replay_is_byte_identical_run_to_run() -> None:
    for capture in CAPTURES[:5]:
        assert render(capture) == render(capture)
