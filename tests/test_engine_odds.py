"""Live odds, ADVANTAGE alerts, roads and shoe statistics from the engine."""

from __future__ import annotations

from fractions import Fraction

from controller.engine import Engine, analytics
from controller.odds import OddsCalculator, rank_counts
from controller.rules import load_profile
from tests.table import Table


def _odds_table(**kw: object) -> Table:
    tb = Table("ez_baccarat")
    tb.engine = Engine("T01", load_profile("ez_baccarat"), 8, odds=True, roads=True, **kw)  # type: ignore[arg-type]
    return tb


def test_odds_follow_the_burn_and_every_coup_in_two_views() -> None:
    tb = _odds_table()
    tb.start(first="AS", burn=("9C",))
    first = tb.of_type("odds.update")
    assert [(e["view"], e["coup"]) for e in first] == [("shoe", 1), ("counter", 1)]
    # the shoe view knows the burned 9C is gone; the counter cannot
    want_shoe = OddsCalculator.for_profile(load_profile("ez_baccarat")).compute(
        rank_counts(8, ["AS", "9C"]), exact=True
    )
    got = first[0]["bets"]["dragon7"]["ev"]
    assert abs(Fraction(got) - want_shoe.bets["dragon7"].ev) < Fraction(1, 10**9)
    counter = OddsCalculator.for_profile(load_profile("ez_baccarat")).compute(rank_counts(8, ["AS"]))
    assert abs(first[1]["bets"]["dragon7"]["ev"] - counter.bets["dragon7"].ev) < 1e-9
    assert first[0]["cards_left"] == first[1]["cards_left"] == 8 * 52 - 2
    tb.cards("9S", "2C", "KH", "3D")
    tb.result()
    assert [e["coup"] for e in tb.of_type("odds.update")][-2:] == [2, 2]
    assert tb.last("roads")["big_road"] == [[{"w": "P", "ties": 0, "pp": False, "bp": False}]]


def test_advantage_alert_when_a_counter_view_ev_crosses_the_threshold_and_back() -> None:
    tb = _odds_table(advantage_threshold=-0.011)
    tb.start(first="AS", burn=("9C",))
    # fresh EZ shoe: Banker (no commission) EV is about -0.0102, above the
    # threshold; Player (about -0.0124) and every other bet are below it
    alerts = tb.of_type("security.alert")
    assert [a["code"] for a in alerts] == ["ADVANTAGE"] and alerts[0]["detail"].startswith("banker:")
    engine = tb.engine
    engine._out = []
    analytics.check_advantage(engine, tb.t, 2, {"banker": {"ev": -0.02}})
    assert engine._out[0]["code"] == "ADVANTAGE" and "back to" in engine._out[0]["detail"]
    engine._out = []
    analytics.check_advantage(engine, tb.t, 3, {"banker": {"ev": -0.03}})
    assert engine._out == [], "no repeat while it stays below"


def test_no_odds_after_the_last_coup() -> None:
    tb = _odds_table()
    tb.start(first="AS", burn=("9C",))
    tb.cut()
    for hand in (("9S", "2C", "KH", "3D"), ("6S", "7C", "KH", "QD")):
        tb.cards(*hand)
        tb.result()
    assert tb.of_type("shoe.ended")
    assert tb.of_type("odds.update")[-1]["coup"] == 2


def test_shoe_statistics_in_the_end_event_and_the_snapshot() -> None:
    tb = Table("ez_baccarat", after_cut="last")
    tb.start()
    tb.cards("TS", "3C", "KH", "AD", "5C", "3H")  # Banker three-card 7: dragon
    tb.result()
    tb.cards("4S", "4C", "4H", "KC")  # player pair; Player 8 natural
    tb.result()
    tb.card(None)
    tb.tick(200)
    snap = tb.engine.snapshot()["stats"]
    assert snap["tags"] == {"banker7": 1, "dragon7": 1}
    assert snap["naturals"] == 1 and snap["player_pairs"] == 1
    assert snap["void_coups"] == 1 and snap["misdeals"] == {"UNREAD_CARD": 1}, "one error, counted once"
