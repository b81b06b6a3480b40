"""Inputs on which ``make fuzz`` (atheris) once broke an invariant, replayed
through the same harness on every ``make test``: each must now run clean
(``fuzz.invariants.EngineChecker`` raises on any broken invariant).

- ``engine-void-coup-held-at-new-shoe.bin``: a void coup holding frames
  after a gap (waiting for a RESULT to tell whose they were) when a new shoe
  was loaded: its held cards were never shown.
- ``engine-carried-card-of-a-void-coup-at-new-shoe.bin``: a card set aside
  to open the next coup (``extra_card: next_coup``) by a coup that was then
  voided and still held frames when the shoe ended: the card was never shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.fuzz_engine import test_one_input as run_engine_session

CASES = sorted((Path(__file__).parent / "fuzz_regressions").glob("engine-*.bin"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_an_engine_input_that_once_broke_an_invariant_runs_clean(path: Path) -> None:
    run_engine_session(path.read_bytes())


def test_the_regression_inputs_are_there() -> None:
    assert len(CASES) >= 2
