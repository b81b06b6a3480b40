"""The board shows a supervisor's correction: the
coup's road cell (its number kept), the tally, the naturals and the last
coup's panel show the corrected result, and the ``roads`` sent after it
agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.board.state import BadMessage, TableState
from tests.conftest import BrokerFactory, eventually, mqtt_client
from tests.support.board import Board, board_config, chromium
from tests.table import Table
from tests.test_board_browser import page_beads, page_sequence, text, visible

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


def _two_coups_corrected() -> tuple[Table, TableState]:
    """Coup 1 Player 9 v 5, coup 2 Banker 7 v 6, then coup 2 corrected
    (P1 6S -> 8D: a Player natural), published to a board in that order."""
    tb = Table(table=T)
    tb.engine.roads = True
    tb.start()
    tb.cards("9S", "2C", "KH", "3D")
    tb.result()
    tb.cards("6S", "7C", "KD", "QD")
    tb.result()
    state = TableState(T)
    state.apply(f"baccarat/{T}/status", b"online")
    for ev in tb.events:
        _publish(state, ev)
    reply, out = tb.command(cmd="correct", coup=2, cards={"P1": "8D"}, reason="tape: P1 was 8D", confirm=True)
    assert reply["ok"], reply
    for ev in out:
        _publish(state, ev)
    return tb, state


def test_the_board_says_which_coup_was_corrected_from_what_to_what_and_why() -> None:
    _, state = _two_coups_corrected()
    view = state.view()
    assert view["correction"] == {
        "coup": 2,
        "was": "B",
        "winner": "P",
        "reason": "tape: P1 was 8D",
        "changes": [{"position": "P1", "was": "6S", "card": "8D"}],
    }
    assert view["last"]["changes"] == [{"position": "P1", "was": "6S", "card": "8D"}]
    assert view["last"]["reason"] == "tape: P1 was 8D"


def test_the_correction_is_shown_until_the_next_coup_ends_and_a_late_copy_does_not_end_it() -> None:
    tb, state = _two_coups_corrected()
    coup2 = next(e for e in tb.events if e["type"] == "coup.result" and e["coup"] == 2)
    _publish(state, coup2)  # a copy (events may come twice: docs/operations.md, MQTT)
    assert state.view()["correction"] is not None
    tb.cards("4S", "4C", "3S", "3C")
    out = tb.result()
    for ev in out:
        _publish(state, ev)
    assert state.view()["correction"] is None
    # a correction of an earlier coup is shown until a coup after the last one ends
    reply, out = tb.command(cmd="correct", coup=1, cards={"P1": "8S"}, reason="tape", confirm=True)
    assert reply["ok"], reply
    for ev in out:
        _publish(state, ev)
    view = state.view()
    assert (view["correction"]["coup"], view["correction"]["was"], view["last"]["coup"]) == (1, "P", 3)
    coup3 = next(e for e in tb.events if e["type"] == "coup.result" and e["coup"] == 3)
    _publish(state, coup3)  # a copy of coup 3's result, which ended before the correction
    assert state.view()["correction"] is not None
    tb.cards("8H", "2H", "JS", "JC")  # coup 4: a Player natural
    for ev in tb.result():
        _publish(state, ev)
    assert state.view()["correction"] is None


def test_a_correction_of_a_coup_the_board_never_saw_says_the_winner_it_replaced_is_unknown() -> None:
    tb = Table(table=T)
    tb.start()
    tb.cards("9S", "2C", "KH", "3D")
    tb.result()
    tb.cards("6S", "7C", "KD", "QD")
    tb.result()
    reply, out = tb.command(cmd="correct", coup=2, cards={"P1": "8D"}, reason="r\ud800", confirm=True)
    state = TableState(T)
    corrected = next(e for e in out if e["type"] == "coup.corrected") if reply["ok"] else None
    if corrected is None:  # (the door refuses a lone surrogate: a journal before it could hold one)
        reply, out = tb.command(cmd="correct", coup=2, cards={"P1": "8D"}, reason="r", confirm=True)
        corrected = {**next(e for e in out if e["type"] == "coup.corrected"), "reason": "r\ud800"}
    raw = json.dumps(corrected).encode()  # (json escapes the lone surrogate, as a publisher may)
    assert state.apply(f"baccarat/{T}/coup/corrected", raw) is True
    c = state.view()["correction"]
    assert (c["coup"], c["was"], c["winner"], c["reason"]) == (2, None, "P", "r\ufffd")


@pytest.mark.parametrize(
    "changes",
    [
        "P1",
        [{"position": "P1", "was": "6S", "card": "8D"}] * 7,
        ["P1 6S 8D"],
        [{"position": "P1", "was": 6, "card": "8D"}],
    ],
)
def test_a_correction_with_malformed_changes_changes_nothing(changes: object) -> None:
    tb, state = _two_coups_corrected()
    before = state.view()
    ev = {**next(e for e in tb.events if e["type"] == "coup.corrected"), "changes": changes, "seq": 10_000}
    with pytest.raises(BadMessage):
        _publish(state, ev)
    assert state.view() == before


@pytest.mark.mqtt
def test_the_page_draws_the_corrected_coup_on_the_roads_in_a_banner_and_in_the_last_coup(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    """Through a real broker, the board and headless Chromium: the bead
    plate shows coup 2 as the Player win it was corrected to, a banner
    says which coup changed, from what to what and why, the last coup's
    panel says it was corrected, and the banner goes when coup 3 ends."""
    broker = mosquitto()
    board = Board(board_config(tmp_path, broker), tmp_path / "board.log")
    pub = mqtt_client(broker)[0]

    def send(events: list[dict[str, object]]) -> None:
        for ev in events:
            topic = f"baccarat/{T}/{str(ev['type']).replace('.', '/')}"
            pub.publish(topic, json.dumps(ev), qos=1).wait_for_publish(10)

    tb = Table(table=T)
    tb.engine.roads = True
    tb.start()
    tb.cards("9S", "2C", "KH", "3D")
    tb.result()
    tb.cards("6S", "7C", "KD", "QD")
    tb.result()
    try:
        with chromium() as driver:
            driver.get(board.url + f"table/{T}")
            pub.publish(f"baccarat/{T}/status", "online", qos=1, retain=True).wait_for_publish(10)
            send(tb.events)
            assert eventually(lambda: page_sequence(driver) == "PB", 30), board.log.read_text()
            assert not visible(driver, "banner-corrected")
            reply, out = tb.command(
                cmd="correct", coup=2, cards={"P1": "8D"}, reason="tape: P1 was 8D", confirm=True
            )
            assert reply["ok"], reply
            send(out)
            assert eventually(lambda: visible(driver, "banner-corrected"), 30)
            assert text(driver, "banner-corrected") == (
                "COUP 2 CORRECTED: Banker \u2192 Player (P1 6S\u21928D; tape: P1 was 8D)"
            )
            assert page_beads(driver) == [(0, 0, "P", "1"), (0, 1, "P", "2")]
            assert text(driver, "last-winner") == "Player wins"
            assert (
                text(driver, "last-corrected") == "Corrected by supervisor: P1 6S\u21928D (tape: P1 was 8D)"
            )
            driver.save_screenshot(str(tmp_path / "corrected.png"))
            tb.cards("4S", "4C", "3S", "3C")
            send(tb.result())
            assert eventually(lambda: not visible(driver, "banner-corrected"), 30)
            assert page_sequence(driver) == "PPT"
    finally:
        pub.disconnect()
        assert board.stop() == 0, board.log.read_text()
