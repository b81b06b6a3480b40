"""The state machines of a shoe and a coup (``controller.engine.machine``)
and Article X's policy table (``controller.engine.article_x``): every move
the engine makes over the capture corpus and a seeded run with every fault
kind is in its table, each table reaches every state it names, a move off
the table raises, and ``docs/engine-tables.md`` is the tables as printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_replay import make_capture
from controller.engine import Engine, article_x, commands, machine
from controller.engine.article_x import (
    ACCEPTABLE,
    ENTERABLE,
    HOLDING,
    POLICY,
    MisdealCode,
    PolicyError,
    Remedy,
)
from controller.engine.machine import (
    COUP_TRANSITIONS,
    SHOE_TRANSITIONS,
    CoupState,
    IllegalTransition,
    ShoePhase,
)
from controller.engine.state import Coup, Shoe
from controller.events import dumps
from controller.replay import replay_events
from drivers.fake_settings import FAULT_KINDS
from firmware_protocols.frames import Frame
from tests.table import Table

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "tests" / "captures").glob("*.shoelog"))


def _reachable(start: object, edges: dict[object, set[object]]) -> set[object]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges.get(todo.pop(), set()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_shoe_phase_is_reachable_from_the_first() -> None:
    edges = {p: set(moves.values()) for p, moves in SHOE_TRANSITIONS.items()}
    assert set(SHOE_TRANSITIONS) == set(ShoePhase)
    assert _reachable(ShoePhase.BURN, edges) == set(ShoePhase)  # type: ignore[arg-type]


def test_every_coup_state_is_reachable_and_the_ends_are_final() -> None:
    edges = {s: set(moves) for s, moves in COUP_TRANSITIONS.items()}
    assert set(COUP_TRANSITIONS) == set(CoupState)
    assert _reachable(CoupState.NEW, edges) == set(CoupState)  # type: ignore[arg-type]
    assert COUP_TRANSITIONS[CoupState.SETTLED] == frozenset()
    assert COUP_TRANSITIONS[CoupState.VOID] == frozenset()
    # a void coup is never settled, nor dealt into as a live one again
    for void in (CoupState.VOID_DEALING, CoupState.VOID_HELD):
        assert COUP_TRANSITIONS[void] <= {CoupState.VOID_DEALING, CoupState.VOID_HELD, CoupState.VOID}


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[set[tuple[str, str]], set[tuple[str, str]]]]:
    """(coup moves, shoe moves as (phase, cause)) seen while the test runs."""
    coup_moves: set[tuple[CoupState, CoupState]] = set()
    shoe_moves: set[tuple[str, str]] = set()
    original = machine.set_phase

    def set_phase(s: Shoe, cause: str) -> None:
        shoe_moves.add((str(s.phase), cause))
        original(s, cause)

    monkeypatch.setattr(machine, "TRACE", coup_moves)
    monkeypatch.setattr(machine, "set_phase", set_phase)
    yield coup_moves, shoe_moves  # type: ignore[misc]


def test_every_move_over_the_corpus_and_a_fault_run_is_in_the_tables(
    traced: tuple[set[tuple[CoupState, CoupState]], set[tuple[str, str]]], tmp_path: Path
) -> None:
    faults = tmp_path / "faults.shoelog"
    make_capture(faults, shoes=12, seed=5, faults=",".join(f"{k}:0.02" for k in FAULT_KINDS))
    states: set[str] = set()
    for path in [*CAPTURES, faults]:
        for ev in replay_events(path):
            if ev["type"] == "misdeal":
                states.add(ev["code"])
    coup_moves, shoe_moves = traced
    # (check raised on any move off the table; these show it looked)
    assert {(a, b) for a, b in coup_moves if b not in COUP_TRANSITIONS[a]} == set()  # type: ignore[index]
    assert {(p, c) for p, c in shoe_moves if c not in SHOE_TRANSITIONS[ShoePhase(p)]} == set()
    assert len(coup_moves) >= 20
    assert {cause for _, cause in shoe_moves} >= {"burn complete", "shoe ends", "frames lost during the burn"}
    assert states <= set(MisdealCode)


def test_every_coups_state_is_what_its_fields_say_after_every_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No place that writes what a coup's live state is made of (its held
    frames, void code, open misdeals) misses ``machine.sync``: after every
    call over the corpus and a fault run, each coup of the shoe in play (and
    each it ever held as current) has the state its data says."""
    seen: dict[int, Coup] = {}
    checked = [0]
    original = Engine.feed

    def feed(self: Engine, frame: Frame) -> list[dict[str, Any]]:
        out = original(self, frame)
        s = self.shoe
        if s is not None:
            for c in [*s.coups.values(), *([s.current] if s.current is not None else [])]:
                seen[id(c)] = c
        for c in seen.values():
            assert c.state == machine.coup_state(c), (c.number, c.state, machine.coup_state(c))
            checked[0] += 1
        return out

    monkeypatch.setattr(Engine, "feed", feed)
    faults = tmp_path / "faults.shoelog"
    make_capture(faults, shoes=6, seed=9, faults=",".join(f"{k}:0.03" for k in FAULT_KINDS))
    for path in [*CAPTURES, faults]:
        seen.clear()
        for _ in replay_events(path):
            pass
    assert checked[0] > 10000


def test_a_move_off_the_shoe_table_raises() -> None:
    tb = Table()
    tb.start()
    s = tb.engine.shoe
    assert s is not None and s.phase == ShoePhase.DEAL
    with pytest.raises(IllegalTransition, match="burn complete"):
        machine.set_phase(s, "burn complete")
    assert s.phase == ShoePhase.DEAL


def test_a_move_off_the_coup_table_raises() -> None:
    """A closed coup waiting for a correction never takes cards again."""
    tb = Table()
    tb.start()
    tb.card("9S", hand="B1")  # WRONG_HAND: open until accepted
    tb.cards("5H", "TD", "2C")  # the player's natural: complete
    tb.result()
    s = tb.engine.shoe
    assert s is not None
    coup = s.coups[1]
    assert coup.state == machine.coup_state(coup) == CoupState.CLOSED
    with pytest.raises(IllegalTransition, match="closed -> flagged"):
        machine.move(coup, CoupState.FLAGGED)  # what a bug would do: deal on it
    assert coup.state == CoupState.CLOSED and not coup.dealing


def test_the_snapshot_state_is_a_documented_phase(
    traced: tuple[set[tuple[CoupState, CoupState]], set[tuple[str, str]]],
) -> None:
    """``burn-unknown`` (the first card unread) is a phase of the table, and
    what ``shoe/state`` says while coup 1 waits for ``enter_card``."""
    tb = Table()
    tb.hello()
    tb.new_shoe()
    tb.card(None)  # the first card unread: the burn count is unknown
    snap = tb.engine.snapshot()
    assert snap["state"] == "burn-unknown" == ShoePhase.BURN_UNKNOWN
    assert type(snap["state"]) is str
    assert json.loads(dumps(snap))["state"] == "burn-unknown"
    reply, _ = tb.command(cmd="enter_card", coup=1, card="3S")  # burns 3 more
    assert reply["ok"], reply
    assert tb.engine.snapshot()["state"] == "burn"
    tb.cards("2C", "2D", "2H")
    assert tb.engine.snapshot()["state"] == "deal"
    _, shoe_moves = traced
    assert shoe_moves == {
        ("burn", "first card unread"),
        ("burn-unknown", "first card entered"),
        ("burn", "burn complete"),
    }
    assert all(c in SHOE_TRANSITIONS[ShoePhase(p)] for p, c in shoe_moves)


def test_the_policy_table_says_what_clears_each_code() -> None:
    assert set(POLICY) == set(MisdealCode)
    assert {MisdealCode.UNREAD_CARD, MisdealCode.SEQUENCE_GAP} == HOLDING
    # accept reports its corrections in the table's order
    assert ACCEPTABLE == ("SEQUENCE_GAP", "WRONG_HAND", "DEVICE_FAULT")
    assert ENTERABLE == ("UNREAD_CARD", "SEQUENCE_GAP")
    # enter_card has what to do for exactly the codes the table says it clears
    assert set(commands._ENTER) == set(ENTERABLE)
    assert article_x.cleared_by(Remedy.DEVICE) == ("DEVICE_FAULT",)
    # a code held frames only if something can clear it (else a hold never ends)
    assert all(p.cleared_by for p in POLICY.values() if p.holds)


def test_every_misdeal_over_the_corpus_is_an_action_its_row_allows() -> None:
    seen: set[tuple[str, str]] = set()
    for path in CAPTURES:
        for line in path.with_suffix(".expected.jsonl").read_text().splitlines():
            ev = json.loads(line)
            if ev["type"] == "misdeal":
                seen.add((ev["code"], ev["action"]))
    for code, action in seen:
        row = POLICY[MisdealCode(code)]
        if action == "corrected":
            assert row.cleared_by or "corrected" in row.actions, code
        else:
            assert action in row.actions or (action == "void" and row.deadline != "-"), (code, action)
    assert {code for code, _ in seen} >= {"UNREAD_CARD", "SEQUENCE_GAP", "EXTRA_CARD", "FOREIGN_CARD"}


def test_an_action_off_the_policy_table_raises() -> None:
    tb = Table()
    tb.start()
    tb.card("4S")
    s = tb.engine.shoe
    assert s is not None and s.current is not None
    with pytest.raises(PolicyError, match="FOREIGN_CARD"):
        article_x.misdeal(tb.engine, tb.t, s.current, "FOREIGN_CARD", "x", "awaiting_supervisor")
    with pytest.raises(PolicyError, match="NOT_A_CODE"):
        article_x.misdeal(tb.engine, tb.t, s.current, "NOT_A_CODE", "x", "void")


def test_the_docs_copy_of_the_tables_is_the_printed_one() -> None:
    from controller.engine import tables

    doc = (ROOT / "docs" / "engine-tables.md").read_text(encoding="utf-8")
    assert doc == tables.markdown(), "regenerate: python -m controller.engine.tables > docs/engine-tables.md"


def test_the_engine_used_is_the_package() -> None:
    assert Engine.__module__ == "controller.engine.facade"
