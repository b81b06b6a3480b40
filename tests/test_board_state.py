"""The board's state model (controller/board/state.py), fed the messages the
daemon publishes: events made by the real engine from a fake shoe's
bytes, published as docs/operations.md, MQTT says (event topics, the retained
``roads``, ``odds``, ``shoe/state`` and ``status``), and hand-made events
for the cases a clean shoe never shows (misdeal banner, void coup, stale
retained messages, malformed payloads)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.board.state import MAX_COUPS, BadMessage, TableState
from controller.engine import Engine
from controller.rules import load_profile
from drivers.fake import FakeShoe
from drivers.fake_settings import FAULT_KINDS
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
    # the retained odds hold the view published last (the counter's); the
    # shoe's view is not known until the next odds.update
    assert odds["view"] == "counter"
    assert view["odds"] is not None and view["odds"]["shoe"] is None
    assert set(view["odds"]["counter"]["bets"]) >= {"player", "banker", "tie"}
    # the last coup is rebuilt from what is retained: the roads' last cell
    # (winner and pairs), its cards unknown (not the cards of nothing);
    # every coup is resolved (the snapshot's tally says so): none is dealt
    last = view["last"]
    assert last["seen"] is False and last["coup"] is None and last["void"] is None
    assert last["winner"] == letters[results[-1]["winner"]]
    assert (last["player_pair"], last["banker_pair"]) == (
        results[-1]["player_pair"],
        results[-1]["banker_pair"],
    )
    assert last["player"] is None and last["banker"] is None and not last["void_unseen"]
    assert view["current"] is None
    # the device is unknown until it is reported (device.status is not retained)
    assert view["device"]["state"] == "unknown" and view["device"]["was"] is None
    # the odds panel is off unless the config asks for it
    plain = TableState(T)
    plain.apply(f"baccarat/{T}/odds", json.dumps(odds).encode())
    assert plain.view()["odds"] is None
    # coups known only from the retained roads have no number (no link)
    assert all(c["coup"] is None for c in view["roads"]["bead_plate"])
    assert view["status"] == "online" and view["broker"]


def test_an_opening_tie_is_shown_in_the_big_roads_first_cell() -> None:
    state = TableState(T)
    state.apply(
        topic_of("shoe.started"), _ev("shoe.started", decks=8, profile="punto_banco", shuffle_commit=None)
    )
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
    state.apply(
        topic_of("shoe.started"), _ev("shoe.started", decks=8, profile="punto_banco", shuffle_commit=None)
    )
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
    # the older shoe's last roads, sent before the new shoe's first event
    old_roads = _ev("roads", shoe="20261123T040000Z", bead_plate=[[{"w": "P", "pp": False, "bp": False}] * 3],
                    big_road=[], big_eye_boy=[], small_road=[], cockroach_pig=[])  # fmt: skip
    state = TableState(T)
    state.apply(
        topic_of("shoe.started"),
        _ev("shoe.started", shoe="20261123T050000Z", decks=8, profile="p", shuffle_commit=None),
    )
    state.apply(topic_of("coup.result"), _result(1, "banker", shoe="20261123T050000Z"))
    assert not state.apply(f"baccarat/{T}/roads", old_roads)
    assert bead_winners(state) == "B"
    # a later shoe starts afresh
    state.apply(
        topic_of("shoe.started"),
        _ev("shoe.started", shoe="20261123T060000Z", decks=8, profile="p", shuffle_commit=None),
    )
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


# --- hand-made events ----------------------------------------------------------------

_SEQ = iter(range(1, 1_000_000))


def _ev(kind: str, shoe: str = "20261123T050000Z", seq: int | None = None, **payload: Any) -> bytes:
    """A hand-made event; ``seq`` the next of the table's unless given."""
    seq = next(_SEQ) if seq is None else seq
    ev = {"v": 1, "type": kind, "event_id": f"{T}/{shoe}/{seq}", "table": T, "shoe": shoe, "seq": seq,
          "ts": "2026-11-23T05:00:00.000Z", **payload}  # fmt: skip
    return json.dumps(ev).encode()


def _result(
    coup: int,
    winner: str,
    shoe: str = "20261123T050000Z",
    seq: int | None = None,
    *,
    drop_seq: bool = False,
    **fields: Any,
) -> bytes:
    ev = json.loads(
        _ev(
            "coup.result",
            shoe=shoe,
            seq=seq,
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
    )
    ev.update(fields)
    if drop_seq:
        del ev["seq"]
    return json.dumps(ev).encode()


_BEAD = {"w": "B", "pp": False, "bp": False}


@pytest.mark.parametrize(
    ("topic", "payload"),
    [
        ("coup/result", b"{not json"),
        ("coup/result", b"[1, 2]"),
        ("coup/result", json.dumps({"shoe": "S1", "seq": 9, "coup": "one", "winner": "banker"}).encode()),
        ("coup/result", json.dumps({"shoe": "S1", "seq": 9, "coup": 1, "winner": "dragon"}).encode()),
        ("roads", json.dumps({"shoe": "S1", "seq": 9, "bead_plate": [[{"w": "X"}]]}).encode()),
        ("roads", json.dumps({"shoe": "S1", "seq": 9, "bead_plate": [[_BEAD]] * 401}).encode()),
        ("misdeal", json.dumps({"shoe": "S1", "seq": 9, "coup": 1, "code": "X", "action": "ignore"}).encode()),  # noqa: E501
        ("status", b"maybe"),
        ("device/status", json.dumps({"seq": 9, "state": "sleepy"}).encode()),
        # the envelope: no seq, a seq that is not a positive integer, a shoe id that is not one
        ("coup/result", _result(2, "banker", shoe="S1", seq=None, drop_seq=True)),
        ("roads", json.dumps({"shoe": "S1", "seq": True, "bead_plate": []}).encode()),
        ("roads", json.dumps({"shoe": "S1", "seq": 2**63, "bead_plate": []}).encode()),
        ("shoe/started", json.dumps({"shoe": "S/1", "seq": 9, "decks": 8}).encode()),
        ("shoe/started", json.dumps({"shoe": "S\ud8001", "seq": 9, "decks": 8}).encode()),
        ("shoe/state", json.dumps({"shoe": "S1", "seq": -1}).encode()),
        # numbers: not finite, past a float, past 4300 digits; nesting past the parser
        ("coup/result", _result(2, "banker", shoe="S1", settlement={"dragon7": float("inf")})),
        ("coup/result", _result(2, "banker", shoe="S1", settlement={"dragon7": 10**400})),
        ("coup/result", b'{"shoe": "S1", "seq": 1' + b"0" * 5000 + b"}"),
        ("coup/result", b"[" * 100_000),
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


# --- catching up after a broker outage: what is rebuilt, what is unknown -------------


def _retained(state: TableState, events: list[dict[str, Any]], snapshot: dict[str, Any]) -> None:
    """What the broker sends on a (re)subscription: the retained topics, as
    they stand after ``events`` (the latest roads and odds, the snapshot)."""
    state.apply(f"baccarat/{T}/status", b"online")
    for kind, topic in (("roads", "roads"), ("odds.update", "odds")):
        latest = [e for e in events if e["type"] == kind]
        if latest:
            state.apply(f"baccarat/{T}/{topic}", json.dumps(latest[-1]).encode())
    state.apply(f"baccarat/{T}/shoe/state", json.dumps(snapshot).encode())


def test_after_an_outage_the_last_coup_and_the_coup_dealt_are_rebuilt_as_far_as_they_are_known() -> None:
    """The board loses the broker two cards into coup k; coup k settles and
    coup k+1 starts while it is away. On the reconnect the roads give coup
    k's winner and pairs (its cards are retained nowhere: unknown, not the
    stale cards of coup k-1), the snapshot the coup now dealt (k+1, none
    of its cards seen); the next events fill both in again."""
    state = TableState(T)
    state.connected(True)
    state.apply(f"baccarat/{T}/status", b"online")
    events: list[dict[str, Any]] = []
    stream = engine_events(seed=7, decks=1)
    k = 0
    cards_of: dict[int, int] = {}
    for ev, _ in stream:
        events.append(ev)
        publish(state, ev)
        if ev["type"] == "card" and ev["position"] in ("P1", "B1", "P2", "B2", "P3", "B3"):
            cards_of[ev["coup"]] = cards_of.get(ev["coup"], 0) + 1
            if ev["coup"] >= 4 and cards_of[ev["coup"]] == 2:
                k = ev["coup"]
                break
    before = state.view()
    assert before["current"]["coup"] == k and len(before["current"]["cards"]) == 2
    assert before["last"]["coup"] == k - 1 and before["last"]["seen"]

    state.connected(False)
    snapshot: dict[str, Any] = {}
    for ev, engine in stream:  # dealt while the board is away
        events.append(ev)
        snapshot = engine.snapshot()
        if ev["type"] == "card" and ev["coup"] == k + 1:
            break
    state.connected(True)
    _retained(state, events, snapshot)
    view = state.view()
    result_k = next(e for e in events if e["type"] == "coup.result" and e["coup"] == k)
    last = view["last"]
    assert last["seen"] is False and last["coup"] is None
    assert last["winner"] == {"banker": "B", "player": "P", "tie": "T"}[result_k["winner"]]
    assert last["player"] is None and last["banker"] is None  # not coup k-1's cards
    assert view["coup"] == k + 1
    assert view["current"] == {"coup": k + 1, "cards": [], "missed": True}

    # live again: the next card of coup k+1 is shown (the earlier one was not
    # seen), and its result is the last coup in full
    for ev, _ in stream:
        events.append(ev)
        publish(state, ev)
        if ev["type"] == "card" and ev["coup"] == k + 1:
            cur = state.view()["current"]
            assert cur["coup"] == k + 1 and cur["missed"] and cur["cards"][-1]["card"] == ev["card"]
        if ev["type"] == "coup.result" and ev["coup"] == k + 1:
            break
    last = state.view()["last"]
    assert last["seen"] and last["coup"] == k + 1 and last["player"]["cards"] == ev["player"]["cards"]
    assert state.view()["current"] is None
    assert bead_winners(state) == "".join(
        {"banker": "B", "player": "P", "tie": "T"}[r["winner"]] for r in results_of(events)
    )


def _snapshot(coup: int, settled: int, voids: int, *, state: str = "deal", opens: Any = ()) -> bytes:
    return json.dumps(
        {
            "table": T,
            "shoe": "20261123T050000Z",
            "state": state,
            "coup": coup,
            "cards_dealt": 6 * coup,
            "cards_left": 416 - 6 * coup,
            "last_coup": None,
            "tally": {"player": 0, "banker": settled, "tie": 0},
            "stats": {
                "naturals": 0,
                "player_pairs": 0,
                "banker_pairs": 0,
                "tags": {},
                "void_coups": voids,
                "misdeals": {},
            },
            "open_misdeals": [{"coup": c, "code": "UNREAD_CARD"} for c in opens],
        }
    ).encode()


def _roads(winners: str) -> bytes:
    cells = [{"w": w, "pp": False, "bp": False} for w in winners]
    return _ev("roads", bead_plate=[cells[i : i + 6] for i in range(0, len(cells), 6)], big_road=[],
               big_eye_boy=[], small_road=[], cockroach_pig=[])  # fmt: skip


def _board_at_coup_2() -> TableState:
    """A board that saw coups 1 and 2 settle (Banker, Banker), then lost the broker."""
    state = TableState(T)
    state.connected(True)
    state.apply(f"baccarat/{T}/shoe/state", _snapshot(0, 0, 0))
    for coup in (1, 2):
        state.apply(
            topic_of("card"), _ev("card", coup=coup, position="P1", card="2H", value=2, face_up=False)
        )
        state.apply(topic_of("coup.result"), _result(coup, "banker"))
        state.apply(f"baccarat/{T}/roads", _roads("B" * coup))
    assert state.view()["last"]["coup"] == 2
    state.connected(False)
    return state


def test_a_coup_voided_while_the_board_was_away_is_shown_as_an_unseen_void() -> None:
    state = _board_at_coup_2()
    state.connected(True)
    state.apply(f"baccarat/{T}/roads", _roads("BB"))  # unchanged: nothing settled
    state.apply(f"baccarat/{T}/shoe/state", _snapshot(3, 2, 1))
    view = state.view()
    assert view["last"]["void"] == {"code": None, "detail": ""} and view["last"]["coup"] is None
    assert not view["last"]["seen"] and view["last"]["winner"] is None
    assert view["current"] is None  # coups 1 to 3 all resolved: none is dealt
    assert view["tally"]["void"] == 1  # counted, though its event was not seen


def test_a_settled_and_a_void_coup_while_away_leave_the_order_unknown() -> None:
    state = _board_at_coup_2()
    state.connected(True)
    state.apply(f"baccarat/{T}/shoe/state", _snapshot(5, 3, 1, opens=[5]))
    state.apply(f"baccarat/{T}/roads", _roads("BBP"))  # the retained topics come in any order
    view = state.view()
    last = view["last"]
    assert (last["winner"], last["void"], last["void_unseen"], last["seen"]) == ("P", None, True, False)
    # coup 5 awaits a supervisor: it is in play, none of its cards seen
    assert view["current"] == {"coup": 5, "cards": [], "missed": True}
    assert [(a["coup"], a["code"]) for a in view["awaiting"]] == [(5, "UNREAD_CARD")]


def test_after_an_outage_with_nothing_missed_the_last_coup_stays_and_the_cards_seen_stay() -> None:
    state = _board_at_coup_2()
    state.connected(True)
    state.apply(topic_of("card"), _ev("card", coup=3, position="P1", card="9S", value=9, face_up=False))
    state.connected(False)
    state.connected(True)
    state.apply(f"baccarat/{T}/roads", _roads("BB"))
    state.apply(f"baccarat/{T}/shoe/state", _snapshot(3, 2, 0))
    view = state.view()
    assert view["last"]["coup"] == 2 and view["last"]["seen"]
    # coup 3 is still open: the card seen stays, but more may have come
    assert view["current"] == {"coup": 3, "cards": [{"position": "P1", "card": "9S"}], "missed": True}
    # an ended shoe has no coup being dealt
    state.connected(False)
    state.connected(True)
    state.apply(f"baccarat/{T}/shoe/state", _snapshot(3, 2, 0, state="ended"))
    assert state.view()["current"] is None and state.view()["ended"]


def test_the_cut_cards_last_coup_is_shown_from_the_event_or_the_snapshot() -> None:
    state = TableState(T)
    state.apply(topic_of("shoe.cut_card"), _ev("shoe.cut_card", coup=60, last_coup=61))
    assert state.view()["cut_last"] == 61
    later = TableState(T)
    later.connected(True)
    snap = json.loads(_snapshot(60, 50, 0))
    later.apply(f"baccarat/{T}/shoe/state", json.dumps({**snap, "last_coup": 61}).encode())
    assert later.view()["cut_last"] == 61


# --- the device badge ------------------------------------------------------------


def test_the_device_is_unknown_until_reported_and_again_after_an_outage_or_the_controller_going() -> None:
    state = TableState(T)
    state.connected(True)
    state.apply(f"baccarat/{T}/status", b"online")
    view = state.view()
    assert view["status"] == "online"  # the controller's retained status, at once
    assert view["device"]["state"] == "unknown" and view["device"]["was"] is None
    online = _ev(
        "device.status", state="online", code="", device={"model": "ShoeX", "firmware": "1", "serial": "9"}
    )
    state.apply(topic_of("device.status"), online)
    assert state.view()["device"]["state"] == "online" and state.view()["device"]["model"] == "ShoeX"
    # the board lost the broker: what the shoe did meanwhile is not known
    state.connected(False)
    state.connected(True)
    assert (state.view()["device"]["state"], state.view()["device"]["was"]) == ("unknown", "online")
    state.apply(topic_of("device.status"), online)
    assert state.view()["device"]["state"] == "online"
    # the controller went away (its Last Will): nobody watches the shoe
    assert state.apply(f"baccarat/{T}/status", b"offline")
    assert (state.view()["device"]["state"], state.view()["device"]["was"]) == ("unknown", "online")


# --- the odds panel: both views ------------------------------------------------------


def test_the_odds_panel_keeps_the_latest_of_each_view() -> None:
    state = TableState(T, odds=True)
    odds_events = []
    for ev, _ in engine_events(seed=3, decks=1):
        publish(state, ev)
        if ev["type"] == "odds.update":
            odds_events.append(ev)
        if len(odds_events) >= 6:
            break
    shoe = [e for e in odds_events if e["view"] == "shoe"][-1]
    counter = [e for e in odds_events if e["view"] == "counter"][-1]
    view = state.view()["odds"]
    for name, ev in (("shoe", shoe), ("counter", counter)):
        assert view[name]["view"] == name and view[name]["coup"] == ev["coup"]
        assert view[name]["cards_left"] == ev["cards_left"]
        assert view[name]["bets"] == {b: {k: float(v) for k, v in o.items()} for b, o in ev["bets"].items()}
    # the counter's view differs from the shoe's while the burned cards are unknown
    assert view["shoe"]["bets"] != view["counter"]["bets"]
    # an older odds.update (a late copy) does not replace a later one
    older = [e for e in odds_events if e["view"] == "shoe" and e["coup"] < shoe["coup"]]
    assert older and not state.apply(topic_of("odds.update"), json.dumps(older[0]).encode())
    assert state.view()["odds"]["shoe"]["coup"] == shoe["coup"]
    # a malformed view is refused; a new shoe starts without odds
    with pytest.raises(BadMessage):
        state.apply(topic_of("odds.update"), json.dumps({**shoe, "view": "dealer"}).encode())
    state.apply(
        topic_of("shoe.started"),
        _ev("shoe.started", shoe="20991231T000000Z", decks=8, profile="p", shuffle_commit=None),
    )
    assert state.view()["odds"] == {"shoe": None, "counter": None}


def test_a_coup_seen_from_its_first_card_is_not_marked_as_missing_cards() -> None:
    """No retained snapshot yet (a new broker): the first one comes after the
    first cards, on the same connection: nothing was missed."""
    state = TableState(T)
    state.connected(True)
    state.apply(topic_of("card"), _ev("card", coup=1, position="P1", card="9S", value=9, face_up=False))
    state.apply(f"baccarat/{T}/shoe/state", _snapshot(1, 0, 0))
    assert state.view()["current"] == {
        "coup": 1,
        "cards": [{"position": "P1", "card": "9S"}],
        "missed": False,
    }


# --- a bad message changes nothing; shoes in the table's order -----


def _messages(events: Iterator[tuple[dict[str, Any], Engine]]) -> list[tuple[str, bytes]]:
    """What the daemon publishes of ``events`` (controller/outputs/mqtt.py):
    each event on its topic, an ``odds.update`` again on the retained
    ``odds``, and the ``shoe/state`` snapshot after each coup."""
    out = []
    for ev, engine in events:
        payload = json.dumps(ev).encode()
        out.append((topic_of(ev["type"]), payload))
        if ev["type"] == "odds.update":
            out.append((f"baccarat/{T}/odds", payload))
        if ev["type"] in ("coup.result", "coup.void", "shoe.started", "shoe.ended"):
            out.append((f"baccarat/{T}/shoe/state", json.dumps(engine.snapshot()).encode()))
    return out


def test_a_bad_roads_about_a_later_shoe_changes_nothing_and_the_table_is_followed_on() -> None:
    """The reproducer: a ``roads`` with a later shoe id (and a later seq)
    and a bad ``bead_plate`` is refused, and the view is not reset to that
    shoe: the table's next events are shown as they come."""
    stream = engine_events(seed=3, decks=1)
    state = TableState(T)
    events: list[dict[str, Any]] = []
    for ev, _ in stream:
        events.append(ev)
        publish(state, ev)
        if ev["type"] == "roads" and len(results_of(events)) == 3:
            break
    before = state.view()
    bad = {**ev, "shoe": "99991231T235959Z", "seq": ev["seq"] + 1, "bead_plate": [[{"w": "X"}]]}
    with pytest.raises(BadMessage):
        state.apply(f"baccarat/{T}/roads", json.dumps(bad).encode())
    assert state.view() == before
    for ev, engine in stream:  # the table deals on
        events.append(ev)
        publish(state, ev)
        if ev["type"] == "coup.result":
            state.apply(f"baccarat/{T}/shoe/state", json.dumps(engine.snapshot()).encode())
    view = state.view()
    assert view["shoe"] == next(e["shoe"] for e in events if e["type"] == "shoe.started")
    letters = {"banker": "B", "player": "P", "tie": "T"}
    assert bead_winners(state) == "".join(letters[r["winner"]] for r in results_of(events))
    assert view["last"]["coup"] == results_of(events)[-1]["coup"] and view["ended"]


def test_a_new_shoe_whose_id_sorts_first_is_shown_when_the_table_sent_it_later() -> None:
    """The box's clock stepped back five minutes between two shoes: the new
    shoe's id sorts before the old one's, its seq after (the table's order);
    it is shown, and a late retained message of the old shoe is not."""
    old, new = "20261123T050000Z", "20261123T045500Z"
    state = TableState(T)
    state.apply(
        topic_of("shoe.started"), _ev("shoe.started", shoe=old, decks=8, profile="p", shuffle_commit=None)
    )
    state.apply(topic_of("coup.result"), _result(1, "banker", shoe=old))
    late_roads = _ev("roads", shoe=old, bead_plate=[[_BEAD]], big_road=[], big_eye_boy=[], small_road=[],
                     cockroach_pig=[])  # fmt: skip
    state.apply(
        topic_of("shoe.ended"),
        _ev(
            "shoe.ended",
            shoe=old,
            reason="cut card",
            coups=0,
            cards_dealt=0,
            tally={"player": 0, "banker": 0, "tie": 0},
        ),
    )
    assert state.view()["ended"]
    state.apply(
        topic_of("shoe.started"), _ev("shoe.started", shoe=new, decks=6, profile="p", shuffle_commit=None)
    )
    state.apply(topic_of("coup.result"), _result(1, "player", shoe=new))
    view = state.view()
    assert view["shoe"] == new and not view["ended"] and bead_winners(state) == "P"
    assert not state.apply(f"baccarat/{T}/roads", late_roads)  # sent before the new shoe began
    assert state.view()["shoe"] == new and bead_winners(state) == "P"


def test_the_retained_messages_are_ordered_by_seq_whatever_the_shoe_ids_and_their_arrival() -> None:
    """A board starting just after a new shoe began (its clock stepped back,
    so its id sorts first) gets the new shoe's ``shoe/state`` and the old
    shoe's last ``roads`` (the new shoe has none yet), in either order: it
    shows the new shoe, with empty roads."""
    events = [(ev, engine.snapshot()) for ev, engine in engine_events(seed=5, decks=1, shoes=2)]
    starts = [i for i, (ev, _) in enumerate(events) if ev["type"] == "shoe.started"]
    assert len(starts) == 2
    first, second = events[starts[0]][0]["shoe"], events[starts[1]][0]["shoe"]
    roads = [ev for ev, _ in events[: starts[1]] if ev["type"] == "roads"][-1]
    snapshot = {**events[starts[1]][1], "shoe": "20000101T000000Z"}  # the clock stepped back
    assert roads["shoe"] == first != second and snapshot["seq"] > roads["seq"]
    for order in ((roads, snapshot), (snapshot, roads)):
        state = TableState(T)
        state.connected(True)
        for message in order:
            topic = "roads" if message is roads else "shoe/state"
            state.apply(f"baccarat/{T}/{topic}", json.dumps(message).encode())
        view = state.view()
        assert view["shoe"] == "20000101T000000Z" and view["roads"]["bead_plate"] == [], order


#: Two shoes as the daemon publishes them (the good messages), with misdeals
#: and void coups: every kind of message the board reads.
GOOD = [
    (f"baccarat/{T}/status", b"online"),
    *_messages(engine_events(seed=5, decks=1, shoes=2, faults=",".join(f"{k}:0.01" for k in FAULT_KINDS))),
]
_KIND_OF = {t: t[len(f"baccarat/{T}/") :] for t, _ in GOOD}
_BY_KIND: dict[str, list[dict[str, Any]]] = {}
for _topic, _payload in GOOD[1:]:
    _BY_KIND.setdefault(_KIND_OF[_topic], []).append(json.loads(_payload))

#: Text as hostile as JSON can carry: lone surrogates, controls, bidi overrides.
HOSTILE_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(), st.sampled_from(list("\ud800\udbff\udc00\udfff\x00\x07\x1b\r\n\x7f\u2028\u202e"))
    ),
    max_size=8,
)
#: Never a small non-negative integer.
NOT_A_COUNT = st.one_of(
    HOSTILE_TEXT,
    st.sampled_from([-1, 1 << 31, 10**400, 1.5, float("nan"), float("inf"), -float("inf"), True, [], {}]),
)
NOT_A_NUMBER = st.one_of(
    HOSTILE_TEXT, st.sampled_from([float("nan"), float("inf"), -float("inf"), 10**400, True, None])
)
_VERSUS = {"v": 1}  # any JSON value that is not what is asked


def _not(allowed: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.one_of(HOSTILE_TEXT, NOT_A_COUNT).filter(lambda v: v not in allowed)


#: kind -> (field, values that make a message of that kind bad)
_CORRUPT: dict[str, list[tuple[str, st.SearchStrategy[Any]]]] = {
    "roads": [
        (
            "bead_plate",
            st.sampled_from(["x", [1], [[{"w": "X"}]], [[{"w": "B", "pp": "no"}]], [[_BEAD] * 401]]),
        ),
        ("bead_plate", _not(("B", "P", "T")).map(lambda w: [[{"w": w, "pp": False, "bp": False}]])),
    ],
    "coup/result": [
        ("coup", st.one_of(NOT_A_COUNT, st.none())),
        ("winner", _not(("player", "banker", "tie"))),
        ("settlement", NOT_A_NUMBER.map(lambda v: {"player": -1, "dragon7": v})),
        ("tags", st.sampled_from([[5], "dragon7", [None]])),
        ("player", st.sampled_from([{"cards": "AH", "total": 1}, {"cards": [], "total": -1}, None])),
        ("natural", st.sampled_from(["yes", 1])),
    ],
    "card": [("card", st.sampled_from([5, [], {}, True, 1.5]))],
    "coup/void": [
        ("coup", st.one_of(NOT_A_COUNT, st.none())),
        ("cards", st.sampled_from(["x", [1], [{"position": "P1", "card": 5}], [{"position": 7}]])),
    ],
    "misdeal": [
        ("coup", st.one_of(NOT_A_COUNT, st.none())),
        ("action", _not(("corrected", "awaiting_supervisor", "void"))),
    ],
    "odds/update": [
        ("bets", st.sampled_from([[], "x", {"player": 1}])),
        ("bets", NOT_A_NUMBER.map(lambda v: {"player": {"win": v, "push": 0, "lose": 0.5, "ev": -0.01}})),
        ("view", _not(("shoe", "counter"))),
    ],
    "shoe/started": [("decks", NOT_A_COUNT), ("profile", st.sampled_from([5, [], {}, True]))],
    "shoe/ended": [("reason", st.sampled_from([5, [], {}, True]))],
    "shoe/cut_card": [("last_coup", NOT_A_COUNT)],
    "device/status": [
        ("state", _not(("online", "offline", "fault"))),
        ("device", st.sampled_from(["x", 5, []])),
    ],
    "shoe/state": [
        ("coup", NOT_A_COUNT),
        ("cards_left", NOT_A_COUNT),
        ("tally", st.sampled_from(["x", 5, [], {"player": "1", "banker": 0, "tie": 0}])),
        ("open_misdeals", st.sampled_from(["x", [1], [{"coup": "4", "code": "X"}]])),
        ("seq", st.sampled_from([-1, 1 << 63, 1.5, True, "7", float("nan")])),
    ],
}
_CORRUPT["odds"] = _CORRUPT["odds/update"]
_EVENT_KINDS = [k for k in _CORRUPT if k != "shoe/state"]


@st.composite
def bad_messages(draw: st.DrawFn) -> tuple[str, bytes]:
    """A message the board must refuse: one field the board reads made bad,
    about the shoe shown or a later one; or a payload that is no JSON object."""
    if draw(st.integers(0, 5)) == 0:  # not even a JSON object
        kind = draw(st.sampled_from([*_CORRUPT, "status"]))
        payload = draw(
            st.one_of(
                st.sampled_from(
                    [b"{not json", b"[" * 100_000, b'{"seq": 1' + b"0" * 5000 + b"}", b"\xff\xfe{}"]
                ),
                st.one_of(HOSTILE_TEXT, NOT_A_NUMBER).map(lambda v: json.dumps(v).encode()),
                HOSTILE_TEXT.filter(lambda t: t.strip().lower() not in ("online", "offline")).map(
                    lambda t: t.encode("utf-8", "surrogatepass")
                ),
            )
        )
        return f"baccarat/{T}/{kind}", payload
    kind = draw(st.sampled_from(list(_CORRUPT)))
    base = dict(draw(st.sampled_from(_BY_KIND[kind])))
    if draw(st.booleans()):  # about a later shoe, sent later: the reproducer's message
        base.update(shoe="99991231T235959Z", seq=10**12)
    envelope = [
        ("seq", st.one_of(st.sampled_from([0, -1, 1 << 63, 1.5, True, "7", None]), HOSTILE_TEXT)),
        ("shoe", st.sampled_from([5, "", "a/b", "x" * 65, [], True])),
        ("shoe", HOSTILE_TEXT.map(lambda t: t + "\ud800")),
    ]
    field, values = draw(st.sampled_from(_CORRUPT[kind] + (envelope if kind in _EVENT_KINDS else [])))
    if kind == "card" and field == "coup":
        base["position"] = "P1"
    base[field] = draw(values)
    return f"baccarat/{T}/{kind}", json.dumps(base).encode()


@st.composite
def hostile_good_messages(draw: st.DrawFn) -> tuple[str, bytes]:
    """A message the board takes, with hostile text where any text is allowed."""
    kind, field = draw(
        st.sampled_from(
            [("misdeal", "detail"), ("misdeal", "code"), ("coup/void", "detail"), ("device/status", "code"),
             ("device/status", "detail"), ("shoe/ended", "reason"), ("shoe/started", "profile")]
        )
    )  # fmt: skip
    base = dict(draw(st.sampled_from(_BY_KIND[kind])))
    base[field] = draw(HOSTILE_TEXT)
    return f"baccarat/{T}/{kind}", json.dumps(base).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bad=st.lists(st.tuples(st.integers(0, len(GOOD)), bad_messages()), max_size=20),
    odd=st.lists(st.tuples(st.integers(0, len(GOOD)), hostile_good_messages()), max_size=4),
    dropped=st.sets(st.integers(0, len(GOOD) - 1), max_size=20),
    outage=st.integers(0, len(GOOD)),
)
@pytest.mark.slow
def test_bad_messages_anywhere_leave_the_state_of_the_good_messages_alone(
    bad: list[tuple[int, tuple[str, bytes]]],
    odd: list[tuple[int, tuple[str, bytes]]],
    dropped: set[int],
    outage: int,
) -> None:
    """Two shoes as published (some messages missed, a reconnect somewhere),
    with bad messages (hostile text, controls, lone surrogates, non-finite
    and huge numbers, wrong types, no JSON object; about the shoe shown or a
    later one) and hostile-but-valid text interleaved anywhere: every bad
    message is refused, and the board's state is the state of the others
    alone."""
    mixed: list[tuple[str, bytes, bool]] = []
    extra = sorted([(i, m, True) for i, m in bad] + [(i, m, False) for i, m in odd], key=lambda x: x[0])
    k = 0
    for i in range(len(GOOD) + 1):
        while k < len(extra) and extra[k][0] == i:
            mixed.append((*extra[k][1], extra[k][2]))
            k += 1
        if i == outage:
            mixed.append(("", b"", False))  # the board loses the broker and comes back
        if i < len(GOOD) and i not in dropped:
            mixed.append((*GOOD[i], False))
    board, alone = TableState(T, odds=True), TableState(T, odds=True)
    board.connected(True)
    alone.connected(True)
    refused = 0
    for topic, payload, is_bad in mixed:
        if not topic:
            for s in (board, alone):
                s.connected(False)
                s.connected(True)
            continue
        try:
            board.apply(topic, payload)
        except BadMessage:
            assert is_bad, (topic, payload[:200])
            refused += 1
            continue
        assert not is_bad, (topic, payload[:200])
        alone.apply(topic, payload)
    assert refused == len(bad)
    assert vars(board) == vars(alone)
    assert board.view() == alone.view()
    json.dumps(board.view(), ensure_ascii=False).encode("utf-8")  # no lone surrogate reaches the page
