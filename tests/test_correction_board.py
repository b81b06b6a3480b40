"""The board shows a supervisor's correction (issue 27, build item 4): the
coup's road cell (its number kept), the tally, the naturals and the last
coup's panel show the corrected result, and the ``roads`` sent after it
agree."""

from __future__ import annotations

import json

import pytest

from controller.board.state import BadMessage, TableState
from tests.table import Table

T = "T01"


def _publish(state: TableState, ev: dict[str, object]) -> bool:
    return state.apply(f"baccarat/{T}/{str(ev['type']).replace('.', '/')}", json.dumps(ev).encode())


def test_the_board_shows_the_corrected_result_in_the_roads_tally_and_last_coup() -> None:
    tb = Table(table=T)
    tb.engine.roads = True
    tb.start()
    tb.cards("9S", "2C", "KH", "3D")  # player 9 v 5
    tb.result()
    tb.cards("6S", "7C", "KD", "QD")  # banker 7 v 6
    tb.result()
    state = TableState(T)
    state.apply(f"baccarat/{T}/status", b"online")
    for ev in tb.events:
        _publish(state, ev)
    view = state.view()
    assert [(c["w"], c["coup"]) for c in view["roads"]["bead_plate"]] == [("P", 1), ("B", 2)]
    assert (view["tally"]["player"], view["tally"]["banker"], view["tally"]["natural"]) == (1, 1, 1)

    _, out = tb.command(cmd="correct", coup=2, cards={"P1": "8D"}, reason="tape", confirm=True)
    corrected, roads = out
    assert _publish(state, corrected) is True
    view = state.view()
    assert [(c["w"], c["coup"]) for c in view["roads"]["bead_plate"]] == [("P", 1), ("P", 2)]
    assert (view["tally"]["player"], view["tally"]["banker"], view["tally"]["natural"]) == (2, 0, 2)
    last = view["last"]
    assert (last["coup"], last["winner"], last["player"]["cards"], last["corrected"]) == (
        2,
        "P",
        ["8D", "KD"],
        True,
    )
    # the roads the engine sends after it: the same cells, numbers kept
    _publish(state, roads)
    assert [(c["w"], c["coup"]) for c in state.view()["roads"]["bead_plate"]] == [("P", 1), ("P", 2)]


def test_a_malformed_correction_changes_nothing_on_the_board() -> None:
    state = TableState(T)
    bad = {"v": 1, "type": "coup.corrected", "table": T, "shoe": "S", "seq": 3, "coup": 1, "demo": False}
    with pytest.raises(BadMessage):
        _publish(state, bad)
