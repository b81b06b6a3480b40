"""The roadmap display in a real browser: a real
Mosquitto, the daemon dealing its fake shoe, the board, and headless
Chromium showing the page. The roads must grow coup by coup and show what
the controller published (winner sequence, tally); stopping the daemon
must show the table offline. A screenshot is saved in the test's
directory (``make board-png`` makes docs/board.png of a whole shoe)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerFactory, Subscriber, eventually, mqtt_client
from tests.support.board import (
    Board,
    TablePublisher,
    board_config,
    chromium,
    daemon_config,
    start_daemon,
    stop,
)

pytestmark = pytest.mark.mqtt

LETTER = {"banker": "B", "player": "P", "tie": "T"}


def results(sub: Subscriber) -> list[dict[str, Any]]:
    """The settled, non-demo coups of the shoe in play, as published."""
    out: list[dict[str, Any]] = []
    shoe = None
    for m in sub.on("baccarat/T01/coup/result"):
        ev = json.loads(m.payload)
        if ev["shoe"] != shoe:
            shoe, out = ev["shoe"], []
        if not ev["demo"] and all(r["coup"] != ev["coup"] for r in out):
            out.append(ev)
    return out


def page_beads(driver: Any) -> list[tuple[int, int, str, str | None]]:
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#bead-plate .cell')]"
        ".map(c => [+c.dataset.x, +c.dataset.y, c.dataset.w, c.dataset.coup || null]);"
    )
    return sorted((int(x), int(y), str(w), coup) for x, y, w, coup in cells)


def page_sequence(driver: Any) -> str:
    return "".join(w for _, _, w, _ in page_beads(driver))


def text(driver: Any, element_id: str) -> str:
    return str(driver.execute_script(f"return document.getElementById('{element_id}').textContent;"))


def visible(driver: Any, element_id: str) -> bool:
    return bool(driver.execute_script(f"return !document.getElementById('{element_id}').hidden;"))


def test_the_page_grows_coup_by_coup_matches_the_results_and_shows_the_table_offline(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    journal = str(tmp_path / "journal.sqlite3")
    board = Board(
        board_config(tmp_path, broker, [{"table": "T01", "journal": journal}]), tmp_path / "board.log"
    )
    history = importlib.util.find_spec("controller.history_web") is not None
    daemon = None
    try:
        with chromium() as driver:
            driver.get(board.url + "table/T01")
            assert "T01" in driver.title
            # the shoe is dealt once the page is up (a browser slow to start
            # on a loaded machine saw the whole shoe at its first look)
            daemon = start_daemon(daemon_config(tmp_path, broker, cards_per_second=8, seed=3))
            # Watch the page while the shoe is dealt: every state it shows
            # is a prefix of what the controller published (never a coup
            # it has not), and the roads grow: the count never falls and
            # is seen at many values on the way, not all at once at the end.
            want = 8
            counts: list[int] = []

            def published_now() -> str:
                return "".join(LETTER[r["winner"]] for r in results(sub))

            def watch() -> bool:
                shown = page_sequence(driver)
                # (the test's own subscriber may be a moment behind the board)
                assert eventually(lambda: published_now().startswith(shown), 30), (shown, published_now())
                if not counts or counts[-1] != len(shown):
                    counts.append(len(shown))
                return len(shown) >= want

            assert eventually(watch, 120), f"the page stopped at {counts}:\n{board.log.read_text()}"
            assert counts == sorted(counts), counts
            assert len([c for c in counts if c > 0]) >= want // 2, counts

            # the controller goes away: the table is shown offline (its Last
            # Will or its own 'offline'), and the page stops moving
            assert stop(daemon) == 0
            assert eventually(lambda: visible(driver, "banner-offline"), 30), board.log.read_text()
            assert text(driver, "banner-offline") == "TABLE OFFLINE"
            assert "offline" in text(driver, "badge-controller")

            # now still: the whole bead plate is the published sequence
            res = results(sub)
            published = "".join(LETTER[r["winner"]] for r in res)
            assert eventually(lambda: page_sequence(driver) == published, 20), (
                page_sequence(driver),
                published,
            )
            beads = page_beads(driver)
            # filled column by column, six to a column
            assert [(x, y) for x, y, _, _ in beads] == [(i // 6, i % 6) for i in range(len(res))]
            assert text(driver, "tally-banker") == str(sum(r["winner"] == "banker" for r in res))
            assert text(driver, "tally-player") == str(sum(r["winner"] == "player" for r in res))
            assert text(driver, "tally-tie") == str(sum(r["winner"] == "tie" for r in res))
            assert text(driver, "tally-player-pair") == str(sum(r["player_pair"] for r in res))
            assert text(driver, "tally-banker-pair") == str(sum(r["banker_pair"] for r in res))
            last = res[-1]
            assert text(driver, "last-coup") == str(last["coup"])
            assert (
                driver.execute_script("return document.getElementById('last-winner').dataset.w;")
                == (LETTER[last["winner"]])
            )
            # the big road: one cell per decisive coup
            big = driver.execute_script("return document.querySelectorAll('#big-road .cell').length;")
            assert big == sum(r["winner"] != "tie" for r in res) or (big == 1 and published == "T" * len(res))
            if history:
                # one click from the road to the coup's timeline
                link = driver.execute_script("return document.querySelector('#bead-plate a.cell').href;")
                assert f"/history/T01/coup/{res[0]['shoe']}/" in link
                driver.get(link)
                # the coup's own timeline (its title names it), not an error
                # page. ("404" not in the title was the check before: the
                # shoe's id is a time, and 20261124T040420Z contains 404.)
                assert driver.title == f"T01 {res[0]['shoe']} coup {res[0]['coup']}", driver.title
                driver.back()
            # no script error, no failed request (the page loads nothing from elsewhere)
            severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert severe == [], severe
            shot = tmp_path / "board.png"
            driver.save_screenshot(str(shot))
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            print(f"\npage bead counts seen while dealing: {counts}")
            print(f"screenshot: {shot} ({len(res)} coups: {published})")
    finally:
        if daemon is not None:
            stop(daemon)
        assert board.stop() == 0, board.log.read_text()


def test_the_page_shows_an_opening_tie_a_misdeal_a_void_coup_a_faulty_shoe_and_the_shoe_ended(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    """What a clean fake shoe rarely deals, published as the daemon would
    (docs/events.md and docs/operations.md, MQTT), and read off the page."""
    broker = mosquitto()
    board = Board(board_config(tmp_path, broker), tmp_path / "board.log")
    pub = mqtt_client(broker)[0]
    shoe = "20261123T050000Z"
    seq = iter(range(1, 1000))

    def send(kind: str, **payload: Any) -> None:
        n = next(seq)
        ev = {"v": 1, "type": kind, "event_id": f"T01/{shoe}/{n}", "table": "T01", "shoe": shoe, "seq": n,
              "ts": "2026-11-23T05:00:00.000Z", **payload}  # fmt: skip
        pub.publish(f"baccarat/T01/{kind.replace('.', '/')}", json.dumps(ev), qos=1).wait_for_publish(10)

    def result(coup: int, winner: str) -> None:
        send("coup.result", coup=coup, demo=False, player={"cards": ["9H", "KS"], "total": 9},
             banker={"cards": ["9D", "KC"], "total": 9}, winner=winner, natural=True, player_pair=False,
             banker_pair=False, tags=[], settlement={"player": 0, "banker": 0, "tie": 8},
             corrections=[])  # fmt: skip

    try:
        with chromium() as driver:
            driver.get(board.url + "table/T01")
            pub.publish("baccarat/T01/status", "online", qos=1, retain=True).wait_for_publish(10)
            send("shoe.started", decks=8, profile="punto_banco", shuffle_commit=None)
            result(1, "tie")
            # the opening tie is in the big road's first cell, not nowhere
            assert eventually(
                lambda: (
                    driver.execute_script(
                        "const c = document.querySelector('#big-road .cell');"
                        "return c ? [c.dataset.w, c.dataset.ties, c.dataset.x, c.dataset.y] : null;"
                    )
                    == ["T", "1", "0", "0"]
                ),
                30,
            ), board.log.read_text()
            send("misdeal", coup=2, code="UNREAD_CARD", detail="card 3 unread", action="awaiting_supervisor",
                 deadline="2099-01-01T00:00:00.000Z")  # fmt: skip
            assert eventually(lambda: visible(driver, "banner-misdeal"), 30)
            assert "coup 2: UNREAD_CARD" in text(driver, "banner-misdeal")
            send("coup.void", coup=2, code="UNREAD_CARD", article="X",
                 cards=[{"position": "P1", "card": "7H"}, {"position": "B1", "card": None}])  # fmt: skip
            assert eventually(lambda: not visible(driver, "banner-misdeal"), 30)
            assert eventually(lambda: "VOID" in text(driver, "last-body"), 30)
            assert "UNREAD_CARD" in text(driver, "last-body") and text(driver, "tally-void") == "1"
            assert page_sequence(driver) == "T"  # a void coup is never on the roads
            send(
                "device.status",
                state="fault",
                code="JAM",
                device={"model": "S", "firmware": "1", "serial": "2"},
            )
            assert eventually(lambda: visible(driver, "banner-device"), 30)
            assert text(driver, "banner-device") == "SHOE FAULT (JAM)"
            send(
                "device.status",
                state="online",
                code="OK",
                device={"model": "S", "firmware": "1", "serial": "2"},
            )
            assert eventually(lambda: not visible(driver, "banner-device"), 30)
            result(3, "banker")
            assert eventually(lambda: page_sequence(driver) == "TB", 30)
            big = driver.execute_script(
                "return [...document.querySelectorAll('#big-road .cell')]"
                ".map(c => [c.dataset.w, c.dataset.ties]);"
            )
            assert big == [["B", "1"]]  # the first decisive coup takes the cell, the tie counted on it
            assert not visible(driver, "banner-ended")
            send("shoe.ended", coups=3, cards_dealt=12, tally={"player": 0, "banker": 1, "tie": 1})
            assert eventually(lambda: visible(driver, "banner-ended"), 30)
            assert not visible(driver, "banner-offline")
            driver.save_screenshot(str(tmp_path / "states.png"))
    finally:
        pub.disconnect()
        assert board.stop() == 0, board.log.read_text()


def odds_cells(driver: Any) -> dict[str, list[str]]:
    """The odds panel: bet -> [win, EV] of the shoe's view, then the counter's."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#odds-body tr')]"
        ".map(r => [r.dataset.bet, [...r.querySelectorAll('td')].map(c => c.textContent)]);"
    )
    return {str(bet): [str(c) for c in cells] for bet, cells in rows}


def test_a_board_started_mid_shoe_shows_what_is_retained_and_marks_the_rest_unknown(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    """The board starts while a shoe is dealt: the retained status, roads,
    snapshot and odds (counter view) are all it has. The controller's
    status shows at once, the shoe (device) as unknown; the last settled
    coup's winner from the roads, its cards unknown; the coup in play by its
    number, none of its cards seen; the odds' two views, the one not yet
    received said so. Then the events fill each in."""
    broker = mosquitto()
    pub = TablePublisher(broker)
    shoe, event, send = pub.shoe, pub.event, pub.send

    bets = {"player": {"win": 0.44, "push": 0.1, "lose": 0.46, "ev": -0.012},
            "banker": {"win": 0.46, "push": 0.1, "lose": 0.44, "ev": -0.0106}}  # fmt: skip
    cells = [{"w": w, "pp": w == "P", "bp": False} for w in "BBP"]
    send("status", "online", retain=True)
    send("roads", event("roads", bead_plate=[cells], big_road=[], big_eye_boy=[], small_road=[],
                        cockroach_pig=[]), retain=True)  # fmt: skip
    send("shoe/state", json.dumps({
        "table": "T01", "shoe": shoe, "state": "deal", "coup": 4, "cards_dealt": 25, "cards_left": 391,
        "last_coup": None, "tally": {"player": 1, "banker": 2, "tie": 0},
        "stats": {"naturals": 0, "player_pairs": 1, "banker_pairs": 0, "tags": {}, "void_coups": 0,
                  "misdeals": {}},
        "open_misdeals": []}), retain=True)  # fmt: skip
    send("odds", event("odds.update", coup=4, cards_left=391, view="counter", bets=bets), retain=True)
    board = Board(board_config(tmp_path, broker, odds=True), tmp_path / "board.log")
    try:
        with chromium() as driver:
            driver.get(board.url + "table/T01")
            assert eventually(lambda: page_sequence(driver) == "BBP", 30), board.log.read_text()
            assert text(driver, "badge-controller") == "controller online"
            assert visible(driver, "badge-device") and text(driver, "badge-device") == "shoe unknown"
            assert not visible(driver, "banner-device")  # unknown is not a fault
            assert text(driver, "last-title") == "Last settled coup" and text(driver, "last-coup") == "?"
            assert driver.execute_script("return document.getElementById('last-winner').dataset.w;") == "P"
            assert "cards and totals are unknown" in text(driver, "last-unseen")
            assert "Player pair" in text(driver, "last-body")
            assert visible(driver, "dealing") and text(driver, "dealing-coup") == "4"
            assert visible(driver, "dealing-missed") and text(driver, "dealing-cards") == ""
            assert visible(driver, "odds")
            # the counter's view (the retained odds) and the shoe's, not received yet
            assert odds_cells(driver) == {"player": ["\u2013", "\u2013", "44.0%", "-1.20%"],
                                          "banker": ["\u2013", "\u2013", "46.0%", "-1.06%"]}  # fmt: skip
            assert text(driver, "odds-shoe-note") == "not received yet"
            assert text(driver, "odds-counter-note") == "coup 4, 391 cards"
            driver.save_screenshot(str(tmp_path / "mid-shoe-start.png"))

            shoe_bets = {"player": {"win": 0.445, "push": 0.1, "lose": 0.455, "ev": -0.01},
                         "banker": {"win": 0.455, "push": 0.1, "lose": 0.445, "ev": 0.0021}}  # fmt: skip
            send("odds/update", event("odds.update", coup=4, cards_left=391, view="shoe", bets=shoe_bets))
            # both views, each in its own columns
            want = {
                "player": ["44.5%", "-1.00%", "44.0%", "-1.20%"],
                "banker": ["45.5%", "+0.21%", "46.0%", "-1.06%"],
            }
            assert eventually(lambda: odds_cells(driver) == want, 30), odds_cells(driver)
            assert text(driver, "odds-shoe-note") == "coup 4, 391 cards"
            send("device/status", event("device.status", state="online", code="OK",
                                        device={"model": "S", "firmware": "1", "serial": "2"}))  # fmt: skip
            assert eventually(lambda: text(driver, "badge-device") == "shoe online", 30)
            send("card", event("card", coup=4, position="P3", card="5H", value=5, face_up=False))
            assert eventually(lambda: "P3" in text(driver, "dealing-cards"), 30)
            send("coup/result", event(
                "coup.result", coup=4, demo=False, player={"cards": ["2H", "3S", "5H"], "total": 0},
                banker={"cards": ["9D", "KC"], "total": 9}, winner="banker", natural=True, player_pair=False,
                banker_pair=False, tags=[], settlement={"player": -1, "banker": 0.95, "tie": -1},
                corrections=[],
            ))  # fmt: skip
            assert eventually(lambda: text(driver, "last-coup") == "4", 30)
            assert text(driver, "last-title") == "Last coup" and not visible(driver, "dealing")
            assert page_sequence(driver) == "BBPB"
            driver.save_screenshot(str(tmp_path / "mid-shoe.png"))
    finally:
        pub.close()
        assert board.stop() == 0, board.log.read_text()
