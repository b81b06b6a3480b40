"""A supervisor's correction of a settled coup:
``correct`` emits ``coup.corrected`` (the hands, winner and settlement
recomputed by the tableau and the bet table, the ``event_id`` it supersedes),
the shoe counts the corrected result in place of the superseded one, and
everything that cannot be a correction is refused in one line, changing
nothing."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from controller import checkpoint
from controller.commands_schema import CommandError, command_from_dict
from controller.contract import event_schema
from controller.engine.facade import Engine
from tests.table import Table


def _table(decks: int = 8, roads: bool = True) -> Table:
    tb = Table(decks=decks)
    tb.engine.roads = roads
    tb.start()  # AS exposed, 2C burned
    # coup 1: Player 4H 3C (7), Banker KD 8S (8): Banker, natural
    tb.cards("4H", "KD", "3C", "8S")
    tb.result()
    # coup 2: Player 9H KC (9), Banker 2D 5S (7): Player, natural
    tb.cards("9H", "2D", "KC", "5S")
    tb.result()
    return tb


def _correct(tb: Table, coup: int, reason: str = "the tape shows it", **cards: str) -> Any:
    return tb.command(cmd="correct", coup=coup, cards=cards, reason=reason, confirm=True)


def _state(tb: Table) -> Any:
    s = tb.engine.shoe
    assert s is not None
    return (
        json.dumps(s.tally),
        json.dumps(s.stats, sort_keys=True),
        dict(s.comp.remaining),
        [dict(r) for r in s.results],
        dict(s.settled_coups),
        tb.engine.seq,
    )


def test_a_correction_changes_the_winner_and_the_settlement_and_names_the_result_it_supersedes() -> None:
    tb = _table()
    result = tb.of_type("coup.result")[0]
    assert result["winner"] == "banker"
    reply, out = _correct(tb, 1, B2="7S")  # Banker KD 7S: 7, Player 7 stands, Banker 7 stands
    assert reply == {"id": "c1", "ok": True, "error": None}
    assert [e["type"] for e in out] == ["coup.corrected", "roads"]
    ev = out[0]
    jsonschema.validate(ev, event_schema("coup.corrected"))
    assert ev["coup"] == 1 and ev["supersedes"] == result["event_id"]
    assert ev["player"] == {"cards": ["4H", "3C"], "total": 7}
    assert ev["banker"] == {"cards": ["KD", "7S"], "total": 7}
    assert (ev["winner"], ev["natural"], ev["player_pair"], ev["banker_pair"]) == ("tie", False, False, False)
    assert ev["settlement"] == {"player": 0, "banker": 0, "tie": 8, "player_pair": -1, "banker_pair": -1}
    assert result["settlement"]["banker"] == 0.95
    assert ev["changes"] == [{"position": "B2", "was": "8S", "card": "7S"}]
    assert (ev["reason"], ev["command_id"]) == ("the tape shows it", "c1")
    s = tb.engine.shoe
    assert s is not None
    # the shoe counts the corrected result, not the superseded one
    assert s.tally == {"player": 1, "banker": 0, "tie": 1}
    assert s.stats["naturals"] == 1
    assert s.comp.remaining["8S"] == 8 and s.comp.remaining["7S"] == 7
    # the roads again, with coup 1 a tie
    assert out[1]["bead_plate"][0][0]["w"] == "T"
    tb.command(cmd="end_shoe")
    ended = tb.last("shoe.ended")
    assert ended["tally"] == {"player": 1, "banker": 0, "tie": 1}
    assert ended["stats"]["naturals"] == 1


def test_a_second_correction_supersedes_the_first() -> None:
    tb = _table()
    _, first = _correct(tb, 2, P1="8H")  # Player 8H KC: 8, still a natural Player win
    assert first[0]["winner"] == "player"
    _, second = _correct(tb, 2, P1="4H", reason="no: 4H")  # Player 4H KC: 4 draws: no P3 dealt
    assert second == []
    _, second = _correct(tb, 2, P1="7D", reason="no: 7D")
    assert second[0]["supersedes"] == first[0]["event_id"]
    assert second[0]["changes"] == [{"position": "P1", "was": "8H", "card": "7D"}]
    assert second[0]["player"]["total"] == 7 and second[0]["winner"] == "tie"


def test_a_pair_and_tags_are_counted_as_corrected() -> None:
    tb = _table()
    _correct(tb, 1, P2="4S")  # Player 4H 4S: 8, a pair; Banker 8: tie on naturals
    s = tb.engine.shoe
    assert s is not None
    assert s.stats["player_pairs"] == 1 and s.tally["tie"] == 1
    _correct(tb, 1, P2="3C")  # back as dealt: the pair is gone again
    assert s.stats["player_pairs"] == 0 and s.tally == {"player": 1, "banker": 1, "tie": 0}


def test_without_confirm_the_reply_says_what_it_would_do_and_nothing_changes() -> None:
    tb = _table()
    result_id = tb.of_type("coup.result")[0]["event_id"]
    before = _state(tb)
    reply, out = tb.command(cmd="correct", coup=1, cards={"B2": "7S"}, reason="tape")
    assert out == [] and _state(tb) == before
    assert reply["ok"] is False
    assert "needs confirm" in reply["error"] and "\n" not in reply["error"]
    assert "Banker KD 7S (7): tie" in reply["error"] and "Banker KD 8S (8): banker" in reply["error"]
    assert reply["would"] == [
        "correct coup 1 (B2 8S->7S): Player 4H 3C (7), Banker KD 7S (7): tie;"
        " settles player 0, banker 0, tie +8, player_pair -1, banker_pair -1",
        "in place of Player 4H 3C (7), Banker KD 8S (8): banker;"
        f" settles player -1, banker +0.95, tie -1, player_pair -1, banker_pair -1 ({result_id})",
    ]
    reply, out = tb.command(cmd="correct", coup=1, cards={"B2": "7S"}, reason="tape", confirm=False)
    assert reply["ok"] is False and out == [] and _state(tb) == before


@pytest.mark.parametrize(
    ("coup", "cards", "error"),
    [
        (3, {"P1": "4D"}, "no coup 3 in this shoe"),
        (2, {"P3": "4D"}, "coup 2 was dealt no P3 (its cards: P1 B1 P2 B2)"),
        (2, {"P1": "4D"}, "coup 2: with these cards P3 is due (Player 4, Banker 7)"),
        (1, {"P1": "4H"}, "coup 1: these are the cards it settled on already"),
    ],
)
def test_what_cannot_be_corrected_is_refused_in_one_line(
    coup: int, cards: dict[str, str], error: str
) -> None:
    tb = _table()
    before = _state(tb)
    reply, out = _correct(tb, coup, **cards)
    assert reply["ok"] is False and reply["error"].startswith(error), reply
    assert "\n" not in reply["error"] and out == [] and _state(tb) == before


def test_a_coup_not_settled_yet_is_refused() -> None:
    tb = _table()
    tb.cards("4C", "5D")  # coup 3 being dealt
    reply, out = _correct(tb, 3, P1="6C")
    assert reply["error"] == "coup 3 is not settled: only a settled coup's result can be corrected"
    assert out == []


def test_a_void_coup_is_refused() -> None:
    tb = _table()
    tb.cards("4C", "5D", "6C", "7D")
    tb.command(cmd="void", coup=3, reason="dropped card")
    reply, _ = _correct(tb, 3, P1="6S")
    assert reply["error"] == "coup 3 has no settled result in this shoe (void, or a demo coup)"


def test_a_card_the_tableau_would_not_deal_is_refused() -> None:
    # coup 3: Player 2C 3D (5) draws 4S; Banker 6H 7H (3), P3 4: Banker draws... deal it whole
    tb = _table()
    tb.cards("2C", "6H", "3D", "7H", "4S", "5S")  # P 9, B 3+5 = 8: Player wins
    tb.result()
    assert tb.last("coup.result")["player"]["cards"] == ["2C", "3D", "4S"]
    # with P2 = 7D the Player has 9: a natural, no third card was due
    reply, out = _correct(tb, 3, P2="7D")
    assert reply["error"].startswith("coup 3: with these cards the tableau deals no P3 (Player ")
    assert out == []


def test_a_card_no_longer_in_the_shoe_is_refused_but_one_it_replaces_comes_back() -> None:
    tb = _table(decks=1)
    # every AS is dealt (the burn's first card, one deck)
    reply, out = _correct(tb, 1, P1="AS")
    assert (
        reply["error"] == "coup 1: P1=AS: no copy of AS is left in this shoe (every copy is dealt elsewhere)"
    )
    assert out == []
    # the two Player cards swapped: each corrected card is one the correction puts back
    reply, out = _correct(tb, 1, P1="3C", P2="4H")
    assert reply["ok"] is True, reply
    assert out[0]["player"]["cards"] == ["3C", "4H"]
    # 9H is coup 2's: not in the shoe, even as a card this correction replaces elsewhere
    reply, _ = _correct(tb, 1, P1="9H", P2="3C")
    assert "no copy of 9H" in reply["error"]


def test_a_demo_coup_and_no_shoe_are_refused() -> None:
    tb = Table(demo_coups=1)
    reply, _ = _correct(tb, 1, P1="4D")
    assert reply["error"] == "no shoe in play"
    tb.start()
    tb.cards("4H", "KD", "3C", "8S")
    tb.result()
    assert tb.last("coup.result")["demo"] is True
    reply, _ = _correct(tb, 1, B2="7S")
    assert reply["error"] == "coup 1 has no settled result in this shoe (void, or a demo coup)"


def test_a_correction_applies_after_the_shoe_ended_until_the_next_shoe_starts() -> None:
    tb = _table()
    tb.command(cmd="end_shoe")
    reply, out = _correct(tb, 1, B2="7S")
    assert reply["ok"] is True and out[0]["type"] == "coup.corrected"
    tb.new_shoe()
    tb.cards("AS", "2C")
    reply, _ = _correct(tb, 1, B2="6S")
    assert reply["error"] == "no coup 1 in this shoe"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"reason": "a\nb"}, "correct: 'reason' must be one line of text"),
        ({"reason": ""}, "correct: 'reason' is required"),
        ({"reason": " "}, "correct: 'reason' is required"),
        ({"reason": "x" * 501}, "correct: 'reason' must be a string of at most 500 characters"),
        ({"cards": {}}, "correct: 'cards' must be an object of 1 to 6 positions"),
        ({"cards": {"P4": "9H"}}, "correct: position 'P4' is none of P1 B1 P2 B2 P3 B3"),
        ({"cards": {"P1": "1H"}}, "correct: P1: not a card"),
        ({"cards": {"P1": 9}}, "correct: P1 must be a card code"),
        ({"cards": {"P1": "9H\u2028"}}, "correct: 'P1' must be one line of text"),
        ({"cards": ["P1", "9H"]}, "correct: 'cards' must be an object"),
        ({"confirm": "yes"}, "correct: 'confirm' must be true or false"),
        ({"coup": 1001}, "'coup' must be an integer from 1 to 1000"),
        ({"coup": 0}, "'coup' must be an integer from 1 to 1000"),
    ],
)
def test_a_correct_command_is_bounded_at_the_door(fields: dict[str, Any], error: str) -> None:
    cmd = {"id": "x", "cmd": "correct", "coup": 1, "cards": {"P1": "9H"}, "reason": "r"} | fields
    with pytest.raises(CommandError) as got:
        command_from_dict(cmd)
    assert str(got.value).startswith(error), str(got.value)


def test_a_correct_command_takes_six_positions_and_normalises_its_cards() -> None:
    six = {"B3": "ks", "P1": "10d", "B1": "2h", "P2": "3c", "B2": "4d", "P3": "5s"}
    cmd = command_from_dict({"id": "x", "cmd": "correct", "coup": 1000, "cards": six, "reason": "r"})
    assert cmd.cards == {"P1": "TD", "B1": "2H", "P2": "3C", "B2": "4D", "P3": "5S", "B3": "KS"}  # type: ignore[union-attr]
    with pytest.raises(CommandError, match="duplicate key 'P1'"):
        from controller.commands_schema import parse_command

        parse_command(b'{"id":"x","cmd":"correct","coup":1,"cards":{"P1":"9H","P1":"8H"},"reason":"r"}')


def test_a_checkpoint_keeps_what_a_correction_needs() -> None:
    tb = _table()
    doc = checkpoint.dump(0, tb.engine, None)
    assert json.loads(doc)["version"] == checkpoint.VERSION
    profile = tb.engine.profile
    _, eng, _ = checkpoint.load(doc, lambda: Engine("T01", profile, 8, roads=True), None)
    assert eng.shoe is not None and eng.shoe.settled_coups == tb.engine.shoe.settled_coups  # type: ignore[union-attr]
    cmd = {"id": "c", "cmd": "correct", "coup": 1, "cards": {"B2": "7S"}, "reason": "r", "confirm": True}
    live = tb.engine.command(cmd, tb.t + 1)
    again = eng.command(cmd, tb.t + 1)
    assert live == again and live[1][0]["type"] == "coup.corrected"
