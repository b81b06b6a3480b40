"""The board as a pit boss meets it, in headless Chromium: right from its
first paint (the view is in the page: with the event stream blocked the
page still shows the table), the whole page on a 1400x900 screen with
every road's right edge in line, the shoe shown online once cards are read
(``device.status`` is not retained), and, with the table offline, no
misdeal countdown ticking and no half-dealt coup shown as live."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerFactory, eventually
from tests.support.board import Board, TablePublisher, board_config, chromium

pytestmark = pytest.mark.mqtt

SHOE = "20261123T050000Z"


def _js(driver: Any, script: str) -> Any:
    return driver.execute_script(script)


def _text(driver: Any, element_id: str) -> str:
    return str(_js(driver, f"return document.getElementById('{element_id}').textContent;"))


def test_the_first_paint_is_the_table_not_zeros_and_the_page_fits_1400x900(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    broker = mosquitto()
    pub = TablePublisher(broker, SHOE)
    event, send = pub.event, pub.send
    cells = [{"w": w, "pp": False, "bp": False} for w in "BBPBPPTB"]
    bets = {b: {"win": 0.44, "push": 0.1, "lose": 0.46, "ev": -0.012} for b in ("player", "banker", "tie")}
    send("status", "online", retain=True)
    send("roads", event("roads", bead_plate=[cells[:6], cells[6:]], big_road=[], big_eye_boy=[],
                        small_road=[], cockroach_pig=[]), retain=True)  # fmt: skip
    send("shoe/state", json.dumps({
        "table": "T01", "shoe": SHOE, "state": "deal", "coup": 9, "cards_dealt": 50, "cards_left": 366,
        "last_coup": None, "tally": {"player": 3, "banker": 4, "tie": 1},
        "stats": {"naturals": 2, "player_pairs": 0, "banker_pairs": 0, "tags": {}, "void_coups": 0,
                  "misdeals": {}},
        "open_misdeals": []}), retain=True)  # fmt: skip
    send("odds", event("odds.update", coup=9, cards_left=366, view="counter", bets=bets), retain=True)
    board = Board(board_config(tmp_path, broker, odds=True), tmp_path / "board.log")
    try:
        assert eventually(
            lambda: board.view()["tally"]["banker"] == 4 and board.view()["status"] == "online", 30
        )
        with chromium(1400, 900) as driver:
            # the event stream blocked: what shows is what the page carried
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/events"]})
            driver.get(board.url + "table/T01")
            assert _js(driver, "return document.body.classList.contains('loading');") is False
            assert _text(driver, "badge-controller") == "controller online"
            assert (
                _text(driver, "tally-banker"),
                _text(driver, "tally-player"),
                _text(driver, "tally-tie"),
            ) == (
                "4",
                "1" if False else "3",
                "1",
            )
            assert _text(driver, "coup") == "9" and _text(driver, "cards-left") == "366"
            beads = _js(
                driver,
                "return [...document.querySelectorAll('#bead-plate .cell')].map(c => c.dataset.w).join('');",
            )
            assert beads == "BBPBPPTB"
            assert _text(driver, "odds-counter-note") == "coup 9, 366 cards"
            driver.save_screenshot(str(tmp_path / "first-paint-1400x900.png"))
            # the whole side column on the screen, the odds panel included
            rect = "document.getElementById(id).getBoundingClientRect()"
            bottom, height = _js(driver, f"const id = 'odds'; return [{rect}.bottom, window.innerHeight];")
            assert bottom <= height, (bottom, height)
            # every road's right edge in line (within a pixel), and left edge
            rights = _js(
                driver, f"return ['bead-plate', 'big-road', 'cockroach-pig'].map(id => {rect}.right);"
            )
            assert max(rights) - min(rights) <= 1.0, rights
            left = _js(driver, f"return ['bead-plate', 'big-road', 'big-eye-boy'].map(id => {rect}.left);")
            assert max(left) - min(left) <= 1.0, left
    finally:
        pub.close()
        assert board.stop() == 0, board.log.read_text()


def test_cards_read_show_the_shoe_online_and_offline_freezes_the_countdown_and_the_deal(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    broker = mosquitto()
    pub = TablePublisher(broker, SHOE)
    event, send = pub.event, pub.send
    send("status", "online", retain=True)
    board = Board(board_config(tmp_path, broker), tmp_path / "board.log")
    try:
        with chromium(1400, 900) as driver:
            driver.get(board.url + "table/T01")
            assert eventually(lambda: _text(driver, "badge-controller") == "controller online", 30)
            assert _text(driver, "badge-device") == "shoe unknown"
            send("shoe/started", event("shoe.started", decks=8, profile="punto_banco", shuffle_commit=None))
            # no device.status (it is not retained): the cards say the shoe reads
            send("card", event("card", coup=1, position="P1", card="5H", value=5, face_up=False))
            send("card", event("card", coup=1, position="B1", card=None, value=None, face_up=False))
            deadline = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + 100))
            send("misdeal", event("misdeal", coup=1, code="UNREAD_CARD", action="awaiting_supervisor",
                                  detail="B1 passed the reader unread", deadline=deadline))  # fmt: skip
            assert eventually(lambda: "s left" in _text(driver, "banner-misdeal"), 30), board.log.read_text()
            assert _text(driver, "badge-device") == "shoe online"
            assert _text(driver, "dealing-title") == "Dealing coup"
            send("status", "offline", retain=True)
            assert eventually(
                lambda: _js(driver, "return !document.getElementById('banner-offline').hidden;"), 30
            )
            banner = _text(driver, "banner-misdeal")
            assert "s left" not in banner and f"(deadline {deadline[11:19]} UTC)" in banner, banner
            assert "the table is offline" in banner
            assert _text(driver, "dealing-title") == "When the table went offline: coup"
            assert _js(driver, "return document.getElementById('dealing').classList.contains('stale');")
            # nobody watches the shoe now: unknown, as it last was
            assert _text(driver, "badge-device") == "shoe unknown (was online)"
            time.sleep(2.5)  # the countdown's tick: nothing moves while offline
            assert _text(driver, "banner-misdeal") == banner
            driver.save_screenshot(str(tmp_path / "offline.png"))
    finally:
        pub.close()
        assert board.stop() == 0, board.log.read_text()
