"""The board's state model (controller/board/state.py), fed the messages the
daemon publishes: events made by the real engine from a fake shoe's
bytes, published as SPEC section 5 says (event topics, the retained
``roads``, ``odds``, ``shoe/state`` and ``status``), and hand-made events
for the cases a clean shoe never shows (misdeal banner, void coup, stale
retained messages, malformed payloads)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller.board.state import MAX_COUPS, BadMessage, TableState
from controller.engine import Engine
from controller.rules import load_profile
from drivers.fake import FakeShoe
from firmware_protocols.detect import make_decoder

T = "T01"


def topic_of(event_type: str) -> str:
    return f"baccarat/{T}/{event_type.replace('.', '/')}"


def engine_events(
    *, seed: int = 3, profile: str = "punto_banco", decks: int = 1, faults: str = "", shoes: int = 1
) -> Iterator[tuple[dict[str, Any], Engine]]:
    """Every event the real engine makes of a fake shoe, with the engine
    (for its ``shoe/state`` snapshot at that moment)."""
    engine = Engine(T, load_profile(profile), decks, odds=True, roads=True)
    decoder = make_decoder("shoe-ascii/1")
    fake = FakeShoe(seed=seed, decks=decks, shoes=shoes, faults=faults, cut_card_min=12)
    for t, data in fake.stream():
        for frame in decoder.feed(t, data):
            for ev in engine.feed(frame):
                yield ev, engine


def publish(state: TableState, ev: dict[str, Any]) -> None:
    """As controller/outputs/mqtt.py publishes an event: on its topic, and an
    odds.update again on the retained ``odds``."""
    payload = json.dumps(ev).encode()
    state.apply(topic_of(ev["type"]), payload)
    if ev["type"] == "odds.update":
        state.apply(f"baccarat/{T}/odds", payload)


def results_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "coup.result" and not e["demo"]]


def bead_winners(state: TableState) -> str:
    return "".join(c["w"] for c in state.view()["roads"]["bead_plate"])


def test_a_whole_shoe_fed_live_matches_the_coup_results() -> None:
    state = TableState(T)
    state.apply(f"baccarat/{T}/status", b"online")
    events = []
    for ev, engine in engine_events(seed=3, decks=1):
        events.append(ev)
        publish(state, ev)
        if ev["type"] == "coup.result":
            state.apply(f"baccarat/{T}/shoe/state", json.dumps(engine.snapshot()).encode())
    results = results_of(events)
    assert len(results) >= 5
    view = state.view()
    letters = {"banker": "B", "player": "P", "tie": "T"}
    assert bead_winners(state) == "".join(letters[r["winner"]] for r in results)
    # every cell links to its coup: the bead plate's coups are the results' in order
    assert [c["coup"] for c in view["roads"]["bead_plate"]] == [r["coup"] for r in results]
    tally = view["tally"]
    assert tally["banker"] == sum(r["winner"] == "banker" for r in results)
    assert tally["player"] == sum(r["winner"] == "player" for r in results)
    assert tally["tie"] == sum(r["winner"] == "tie" for r in results)
    assert tally["player_pair"] == sum(r["player_pair"] for r in results)
    assert tally["banker_pair"] == sum(r["banker_pair"] for r in results)
    assert tally["natural"] == sum(r["natural"] for r in results)
    ended = [e for e in events if e["type"] == "shoe.ended"]
    assert ended and view["ended"]
    assert {k: tally[k] for k in ("player", "banker", "tie")} == ended[-1]["tally"]
    last = results[-1]
    assert view["last"]["coup"] == last["coup"]
    assert view["last"]["player"] == last["player"]
    assert view["last"]["banker"] == last["banker"]
    # the big road's cells are the decisive coups, each with its number
    decisive = [r["coup"] for r in results if r["winner"] != "tie"]
    assert [c["coup"] for c in view["roads"]["big_road"]] == decisive
    # the derived roads have as many cells as the engine's roads event
    roads = [e for e in events if e["type"] == "roads"][-1]
    for name in ("big_eye_boy", "small_road", "cockroach_pig"):
        assert [c["c"] for c in view["roads"][name]] == [c for col in roads[name] for c in col]
        assert all(c["coup"] in decisive for c in view["roads"][name])


def test_a_board_started_mid_shoe_draws_the_shoe_so_far_from_the_retained_topics() -> None:
    events: list[dict[str, Any]] = []
    snapshot: dict[str, Any] = {}
    for ev, engine in engine_events(seed=5, decks=1):
        events.append(ev)
        snapshot = engine.snapshot()
        if ev["type"] == "roads" and len(results_of(events)) == 8:
            break
    roads = [e for e in events if e["type"] == "roads"][-1]
    odds = [e for e in events if e["type"] == "odds.update"][-1]
    state = TableState(T, odds=True)
    state.connected(True)
    # what the broker sends a new subscriber: the retained messages only
    state.apply(f"baccarat/{T}/status", b"online")
    state.apply(f"baccarat/{T}/roads", json.dumps(roads).encode())
    state.apply(f"baccarat/{T}/odds", json.dumps(odds).encode())
    state.apply(f"baccarat/{T}/shoe/state", json.dumps(snapshot).encode())
    view = state.view()
    results = results_of(events)
    letters = {"banker": "B", "player": "P", "tie": "T"}
    assert bead_winners(state) == "".join(letters[r["winner"]] for r in results)
    assert view["coup"] == snapshot["coup"] and view["cards_left"] == snapshot["cards_left"]
    assert view["tally"]["natural"] == sum(r["natural"] for r in results)
    assert view["odds"] is not None and set(view["odds"]["bets"]) >= {"player", "banker", "tie"}
    # the odds panel is off unless the config asks for it
    plain = TableState(T)
    plain.apply(f"baccarat/{T}/odds", json.dumps(odds).encode())
    assert plain.view()["odds"] is None
    # coups known only from the retained roads have no number (no link)
    assert all(c["coup"] is None for c in view["roads"]["bead_plate"])
    assert view["status"] == "online" and view["broker"]


def test_an_opening_tie_is_shown_in_the_big_roads_first_cell() -> None:
    state = TableState(T)
    state.apply(topic_of("shoe.started"), _ev("shoe.started", decks=8, profile="punto_banco"))
    state.apply(topic_of("coup.result"), _result(1, "tie"))
    big = state.view()["roads"]["big_road"]
    assert [(c["x"], c["y"], c["w"], c["ties"], c["coup"]) for c in big] == [(0, 0, "T", 1, 1)]
    state.apply(topic_of("coup.result"), _result(2, "tie"))
    state.apply(topic_of("coup.result"), _result(3, "banker"))
    big = state.view()["roads"]["big_road"]
    # the first decisive coup takes the cell, with the ties counted on it
    assert [(c["x"], c["y"], c["w"], c["ties"], c["coup"]) for c in big] == [(0, 0, "B", 2, 3)]
    assert bead_winners(state) == "TTB"


def test_a_misdeal_banner_lasts_until_the_coup_is_settled_and_a_void_coup_shows_as_void() -> None:
    state = TableState(T)
    state.apply(topic_of("shoe.started"), _ev("shoe.started", decks=8, profile="punto_banco"))
    state.apply(
        topic_of("misdeal"),
        _ev("misdeal", coup=1, code="UNREAD_CARD", detail="card unread", action="awaiting_supervisor",
            deadline="2026-11-23T05:00:00.000Z"),
    )  # fmt: skip
    awaiting = state.view()["awaiting"]
    assert [(a["coup"], a["code"], a["deadline"]) for a in awaiting] == [
        (1, "UNREAD_CARD", "2026-11-23T05:00:00.000Z")
    ]
    state.apply(topic_of("coup.result"), _result(1, "player"))
    assert state.view()["awaiting"] == []

    state.apply(
        topic_of("misdeal"),
        _ev(
            "misdeal", coup=2, code="SEQUENCE_GAP", detail="gap", action="awaiting_supervisor", deadline=None
        ),
    )
    state.apply(
        topic_of("coup.void"),
        _ev("coup.void", coup=2, code="SEQUENCE_GAP", article="X", cards=[{"position": "P1", "card": "7H"}]),
    )
    view = state.view()
    assert view["awaiting"] == []
    assert view["last"]["coup"] == 2 and view["last"]["void"]["code"] == "SEQUENCE_GAP"
    assert view["voids"] == [{"coup": 2, "code": "SEQUENCE_GAP"}]
    assert bead_winners(state) == "P"  # a void coup is never on the roads


def test_device_status_and_the_last_will_show_the_table_offline() -> None:
    state = TableState(T)
    state.apply(f"baccarat/{T}/status", b"online")
    state.apply(
        topic_of("device.status"),
        _ev(
            "device.status", state="fault", code="JAM", device={"model": "X", "firmware": "1", "serial": "9"}
        ),
    )
    view = state.view()
    assert view["device"]["state"] == "fault" and view["device"]["code"] == "JAM"
    assert view["status"] == "online"
    state.apply(f"baccarat/{T}/status", b"offline")
    assert state.view()["status"] == "offline"


def test_a_retained_message_about_an_older_shoe_is_ignored() -> None:
    state = TableState(T)
    state.apply(topic_of("shoe.started"), _ev("shoe.started", shoe="20261123T050000Z", decks=8, profile="p"))
    state.apply(topic_of("coup.result"), _result(1, "banker", shoe="20261123T050000Z"))
    old_roads = _ev("roads", shoe="20261123T040000Z", bead_plate=[[{"w": "P", "pp": False, "bp": False}] * 3],
                    big_road=[], big_eye_boy=[], small_road=[], cockroach_pig=[])  # fmt: skip
    assert not state.apply(f"baccarat/{T}/roads", old_roads)
    assert bead_winners(state) == "B"
    # a later shoe starts afresh
    state.apply(topic_of("shoe.started"), _ev("shoe.started", shoe="20261123T060000Z", decks=8, profile="p"))
    view = state.view()
    assert view["shoe"] == "20261123T060000Z" and view["roads"]["bead_plate"] == [] and view["last"] is None


def test_roads_arriving_before_their_result_keep_the_coup_number() -> None:
    state = TableState(T)
    state.apply(topic_of("coup.result"), _result(1, "banker"))
    cells = [{"w": "B", "pp": False, "bp": False}, {"w": "P", "pp": False, "bp": False}]
    roads = _ev("roads", bead_plate=[cells], big_road=[], big_eye_boy=[], small_road=[], cockroach_pig=[])
    state.apply(f"baccarat/{T}/roads", roads)
    assert [c["coup"] for c in state.view()["roads"]["bead_plate"]] == [1, None]
    state.apply(topic_of("coup.result"), _result(2, "player"))
    assert [c["coup"] for c in state.view()["roads"]["bead_plate"]] == [1, 2]
    # a copy of an event (QoS 1 may deliver twice) changes nothing
    state.apply(topic_of("coup.result"), _result(2, "player"))
    assert bead_winners(state) == "BP"


def test_after_a_reconnect_the_retained_state_replaces_the_open_misdeals() -> None:
    state = TableState(T)
    state.apply(
        topic_of("misdeal"),
        _ev("misdeal", coup=4, code="UNREAD_CARD", detail="", action="awaiting_supervisor", deadline=None),
    )
    snapshot = {"table": T, "shoe": "20261123T050000Z", "state": "deal", "coup": 5, "cards_dealt": 30,
                "cards_left": 386, "last_coup": None, "tally": {"player": 2, "banker": 2, "tie": 0},
                "stats": {"naturals": 1, "player_pairs": 0, "banker_pairs": 0, "tags": {}, "void_coups": 0,
                          "misdeals": {}},
                "open_misdeals": []}  # fmt: skip
    state.apply(f"baccarat/{T}/shoe/state", json.dumps(snapshot).encode())
    assert len(state.view()["awaiting"]) == 1  # live: a snapshot may lag the events
    state.connected(False)
    state.connected(True)
    state.apply(f"baccarat/{T}/shoe/state", json.dumps(snapshot).encode())
    assert state.view()["awaiting"] == []  # resolved while the board was away


@pytest.mark.parametrize(
    ("profile", "bets"),
    [("ez_baccarat", {"dragon7", "panda8"}), ("baccarat_27", {"b27"})],
)
def test_side_bet_hits_are_counted_for_the_bets_the_profile_offers(profile: str, bets: set[str]) -> None:
    state = TableState(T)
    events = []
    for ev, _ in engine_events(seed=11, decks=2, profile=profile):
        events.append(ev)
        publish(state, ev)
    results = results_of(events)
    hits = {s["bet"]: s["hits"] for s in state.view()["side_bets"]}
    assert set(hits) == bets
    for bet in bets:
        assert hits[bet] == sum((r["settlement"] or {}).get(bet, -1) > 0 for r in results)
    assert sum(hits.values()) > 0, "the shoe should have at least one side-bet hit to check"


_BEAD = {"w": "B", "pp": False, "bp": False}


@pytest.mark.parametrize(
    ("topic", "payload"),
    [
        ("coup/result", b"{not json"),
        ("coup/result", b"[1, 2]"),
        ("coup/result", json.dumps({"shoe": "S1", "coup": "one", "winner": "banker"}).encode()),
        ("coup/result", json.dumps({"shoe": "S1", "coup": 1, "winner": "dragon"}).encode()),
        ("roads", json.dumps({"shoe": "S1", "bead_plate": [[{"w": "X"}]]}).encode()),
        ("roads", json.dumps({"shoe": "S1", "bead_plate": [[_BEAD]] * 401}).encode()),
        ("misdeal", json.dumps({"shoe": "S1", "coup": 1, "code": "X", "action": "ignore"}).encode()),
        ("status", b"maybe"),
        ("device/status", json.dumps({"state": "sleepy"}).encode()),
    ],
)  # fmt: skip
def test_a_malformed_message_is_refused_and_changes_nothing(topic: str, payload: bytes) -> None:
    assert MAX_COUPS == 400  # the oversized bead plate above is one more
    state = TableState(T)
    state.apply(topic_of("coup.result"), _result(1, "banker", shoe="S1"))
    before = state.view()
    with pytest.raises(BadMessage):
        state.apply(f"baccarat/{T}/{topic}", payload)
    assert state.view() == before


def test_other_topics_and_other_tables_are_not_shown() -> None:
    state = TableState(T)
    assert not state.apply(f"baccarat/{T}/security/alert", b"{}")
    assert not state.apply(f"baccarat/{T}/cmd/reply", b"{}")
    assert not state.apply("baccarat/T02/coup/result", _result(1, "banker"))
    assert state.view()["roads"]["bead_plate"] == []


# --- hand-made events ----------------------------------------------------------------

_SEQ = iter(range(1, 1_000_000))


def _ev(kind: str, shoe: str = "20261123T050000Z", **payload: Any) -> bytes:
    seq = next(_SEQ)
    ev = {"v": 1, "type": kind, "event_id": f"{T}/{shoe}/{seq}", "table": T, "shoe": shoe, "seq": seq,
          "ts": "2026-11-23T05:00:00.000Z", **payload}  # fmt: skip
    return json.dumps(ev).encode()


def _result(coup: int, winner: str, shoe: str = "20261123T050000Z") -> bytes:
    return _ev(
        "coup.result",
        shoe=shoe,
        coup=coup,
        demo=False,
        player={"cards": ["2H", "3S"], "total": 5},
        banker={"cards": ["4D", "4C"], "total": 8},
        winner=winner,
        natural=False,
        player_pair=False,
        banker_pair=False,
        tags=[],
        settlement={"player": -1, "banker": 0.95, "tie": -1},
        corrections=[],
    )


def test_a_lagging_snapshot_never_takes_the_coup_number_or_the_cards_back() -> None:
    state = TableState(T)
    base = {"table": T, "shoe": "20261123T050000Z", "state": "deal", "last_coup": None, "open_misdeals": [],
            "tally": {"player": 0, "banker": 0, "tie": 0}, "stats": {"naturals": 0, "tags": {}}}  # fmt: skip
    state.apply(
        f"baccarat/{T}/shoe/state",
        json.dumps({**base, "coup": 4, "cards_left": 390, "cards_dealt": 26}).encode(),
    )
    state.apply(topic_of("card"), _ev("card", coup=5, position="P1", card="7H", value=7, face_up=False))
    assert state.view()["coup"] == 5  # the coup being dealt
    state.apply(
        f"baccarat/{T}/shoe/state",
        json.dumps({**base, "coup": 4, "cards_left": 391, "cards_dealt": 25}).encode(),
    )
    view = state.view()
    assert (view["coup"], view["cards_left"]) == (5, 390)
    state.apply(
        f"baccarat/{T}/shoe/state",
        json.dumps({**base, "coup": 5, "cards_left": 386, "cards_dealt": 30}).encode(),
    )
    view = state.view()
    assert (view["coup"], view["cards_left"], view["cards_dealt"]) == (5, 386, 30)
