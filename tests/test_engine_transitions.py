"""Every move of the engine's two state tables (``controller.engine.machine``:
``SHOE_TRANSITIONS``, ``COUP_TRANSITIONS``) is taken by the regression
corpus, and none outside them.

The corpus is ``tests/captures/*.shoelog``, replayed with ``machine.TRACE``
(a coup's ``(from, to)``) and ``machine.SHOE_TRACE`` (a shoe's ``(phase,
cause)``) set. A capture records the device's bytes, never a supervisor's
command (``tests/captures/README.md``), so the few moves only a command can
make are listed in :data:`COMMAND_ONLY`, each with a scenario (frames and
commands through ``tests.table.Table``) that makes it; the captures must take
every other move, and none of those. A move that no input can make is not
in the tables (see the comments there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.engine import machine
from controller.engine.machine import COUP_TRANSITIONS, SHOE_TRANSITIONS, CoupState, ShoePhase
from controller.replay import replay_events
from tests.captures.build import SHOWS
from tests.table import Table

HERE = Path(__file__).parent / "captures"
CAPTURES = sorted(HERE.glob("*.shoelog"))

CoupMove = tuple[CoupState, CoupState]
ShoeMove = tuple[ShoePhase, str]
Move = CoupMove | ShoeMove

TABLE_COUP: set[CoupMove] = {(a, b) for a, moves in COUP_TRANSITIONS.items() for b in moves}
TABLE_SHOE: set[ShoeMove] = {(p, cause) for p, moves in SHOE_TRANSITIONS.items() for cause in moves}


def _first_card_entered() -> None:
    tb = Table()
    tb.hello()
    tb.new_shoe()
    tb.card(None)  # the first card unread: the burn count is unknown
    reply, _ = tb.command(cmd="enter_card", coup=1, card="3S")
    assert reply["ok"], reply
    tb.cards("2C", "2D", "2H")


def _coup_lost_whole() -> None:
    # five frames lost between coups 2 and 3: a whole coup, or coup 3's
    # first cards; the numbering is lost at coup 3's deadline, and the
    # supervisor says the next coup is 5: coup 4 is counted void, never dealt
    tb = Table()
    tb.start()
    tb.cards("9S", "KH", "TS", "QH")
    tb.result()
    tb.cards("8D", "2C", "KD", "5C")
    tb.result()
    tb.gap(5)
    tb.cards("7H", "7D", "TC", "JS")
    tb.result()
    tb.tick(130)
    reply, _ = tb.command(cmd="accept", coup=5, confirm=True)  # (coups lost whole: confirmed)
    assert reply["ok"], reply
    tb.cards("8C", "3H", "KC", "4H")
    tb.result()


def _gap_after_early_result_accepted() -> None:
    # an early RESULT (P3 due), then a frame lost: held until the
    # supervisor accepts the gap; the coup waits for its due card again
    tb = Table()
    tb.start()
    tb.cards("TS", "7C", "KH", "QD")
    tb.result()
    tb.gap(1)
    reply, _ = tb.command(cmd="accept", coup=1)
    assert reply["ok"], reply
    tb.card("4H")
    tb.result()


def _last_coup_void_in_burn() -> None:
    # the first card unread: coup 1 holds the cut card (after_cut last: coup
    # 1 is the last); entered, the burn goes on with coup 1 in play, and a
    # RESULT before any card voids it: the dealing is over in the burn, and
    # the shoe ends at once
    tb = Table(after_cut="last")
    tb.hello()
    tb.new_shoe()
    tb.card(None)
    tb.cut()
    reply, _ = tb.command(cmd="enter_card", coup=1, card="3S")
    assert reply["ok"], reply
    out = tb.result()
    assert [e["type"] for e in out][-1] == "shoe.ended"


#: move -> (why a capture cannot make it, a scenario that makes it)
COMMAND_ONLY: dict[Move, tuple[str, Callable[[], None]]] = {
    (ShoePhase.BURN_UNKNOWN, "first card entered"): ("enter_card of the first card", _first_card_entered),
    (ShoePhase.BURN, "last coup dealt"): (
        "a coup in play during the burn is coup 1 once enter_card gave the unread first card",
        _last_coup_void_in_burn,
    ),
    (CoupState.NEW, CoupState.CLOSED): (
        "accept with a coup number while the numbering is lost (dealing.void_lost_whole)",
        _coup_lost_whole,
    ),
    (CoupState.HELD, CoupState.EARLY_RESULT): (
        "the hold of a coup pressed early ends only by accept or enter_card (the next RESULT "
        "clears a gap only in a void coup or one the gap opened: loss.ends_at_result)",
        _gap_after_early_result_accepted,
    ),
}


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[set[CoupMove], set[ShoeMove]]]:
    coup: set[CoupMove] = set()
    shoe: set[ShoeMove] = set()
    monkeypatch.setattr(machine, "TRACE", coup)
    monkeypatch.setattr(machine, "SHOE_TRACE", shoe)
    yield coup, shoe


def _replay(paths: list[Path]) -> None:
    for path in paths:
        for _ in replay_events(path):
            pass


def _show(moves: set[CoupMove] | set[ShoeMove] | set[Move]) -> list[str]:
    return sorted(f"{a} -> {b}" if isinstance(b, CoupState) else f"{a} on {b!r}" for a, b in moves)


def test_the_captures_take_every_move_a_capture_can_make(
    traced: tuple[set[CoupMove], set[ShoeMove]],
) -> None:
    _replay(CAPTURES)
    coup, shoe = traced
    taken: set[Move] = {*coup, *shoe}
    want: set[Move] = {*TABLE_COUP, *TABLE_SHOE} - set(COMMAND_ONLY)
    missing = _show(want - taken)
    assert not missing, f"no capture takes {missing}: add one, or remove a move no input can make"
    listed = _show(taken & set(COMMAND_ONLY))
    assert not listed, f"a capture takes {listed}: not command-only, take it out of COMMAND_ONLY"
    # (machine raises on a move off its table; this shows the trace saw them)
    assert _show(taken - {*TABLE_COUP, *TABLE_SHOE}) == []
    assert len(coup) >= 20 and len(shoe) >= 5


@pytest.mark.parametrize("move", list(COMMAND_ONLY), ids=[_show({m})[0] for m in COMMAND_ONLY])
def test_a_move_only_a_command_makes_is_made_by_its_scenario(
    move: Move, traced: tuple[set[CoupMove], set[ShoeMove]]
) -> None:
    _, scenario = COMMAND_ONLY[move]
    scenario()
    coup, shoe = traced
    assert move in {*coup, *shoe}


def test_the_corpus_and_the_command_scenarios_take_exactly_the_tables(
    traced: tuple[set[CoupMove], set[ShoeMove]],
) -> None:
    _replay(CAPTURES)
    for _, scenario in COMMAND_ONLY.values():
        scenario()
    coup, shoe = traced
    assert not (untaken := _show(TABLE_COUP - coup)), f"coup moves no input takes: {untaken}"
    assert not (untaken := _show(TABLE_SHOE - shoe)), f"shoe moves no input takes: {untaken}"
    assert _show(coup - TABLE_COUP) == _show(shoe - TABLE_SHOE) == []


_SHOWN = re.compile(r"# shows the move (coup|shoe): (.+)")


def _named(kind: str, text: str) -> Move:
    if kind == "coup":
        a, b = text.split(" -> ")
        return CoupState(a), CoupState(b)
    phase, cause = re.fullmatch(r"(\S+) on '(.+)'", text).groups()  # type: ignore[union-attr]
    return ShoePhase(phase), cause


@pytest.mark.parametrize("name", sorted(SHOWS))
def test_a_move_capture_takes_the_move_its_header_names(
    name: str, traced: tuple[set[CoupMove], set[ShoeMove]]
) -> None:
    path = HERE / f"{name}.shoelog"
    named = [_named(*m.groups()) for m in map(_SHOWN.match, path.read_text().splitlines()) if m]
    assert len(named) == len(SHOWS[name]) >= 1
    _replay([path])
    coup, shoe = traced
    assert _show(set(named) - {*coup, *shoe}) == []
    assert set(named) <= {*TABLE_COUP, *TABLE_SHOE}
