"""Supervisor entries checked against the shoe's own evidence, and applied
only once confirmed where they go beyond the entered card
(``controller.engine.evidence``).

The issue's two reproducers, through the engine and once through ``ctl``
against a real daemon and the suite's broker:

(a) an unread Player third card, really 7D, after which the dealer drew the
    Banker's third card 9S: ``enter_card 2H`` was taken, 9S set aside and
    the coup settled Player 7-6 instead of Banker 5-2, after which the right
    7D (and a void) were refused as already settled. Now 2H is refused,
    naming why, and 7D settles Banker 5-2.
(b) ``accept`` of coup 3 when the cards read since the loss cannot be coup
    3's (3 cards before the loss and 5 after: its end was lost, and a whole
    coup with it) settled the next physical coup's cards as coup 3 (with
    extra cards). Now it is refused with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.commands_schema import (
    Accept,
    AcceptAsTaken,
    CommandError,
    EnterCard,
    EnterCardAsTaken,
    Void,
    command_json,
    parse_command,
    parse_journalled,
)
from controller.engine import Engine
from firmware_protocols.frames import Button, Card, Frame, Hello, SequenceGap, Status
from firmware_protocols.shoe_ascii import Encoder
from tests.conftest import BrokerFactory, Subscriber
from tests.table import T0, Table
from tests.test_cli_errors import one_line_error
from tests.test_ctl import _daemon, _supervisor, ctl

REFUSED_2H = (
    "2H as P3 makes the Banker stand on 6 against a Player 3rd card of 2, yet B3 9S was dealt"
    " in coup 1 before its RESULT"
)
REFUSED_ACCEPT_3 = (
    "accept 3: the 5 card(s) read since the 7 frames lost in coup 3 cannot be its own (3 read before"
    " the loss, at least 1 due, at most 6 in a coup): the frames lost hold its end, and the cards are"
    " coup 4 or 5's; void 3, then accept with the number of the next coup to be dealt"
)


def _brief(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["type"], e.get("coup"), e.get("position"), e.get("card"), e.get("code")) for e in events]


def _unread_p3_then_b3(tb: Table) -> None:
    tb.start()
    tb.cards("3H", "4D", "2S", "2D")  # Player 5 draws, Banker 6
    tb.card(None)  # P3 passes unread: it was 7D
    tb.card("9S")  # B3: Banker 6 draws against a 7
    tb.result()


def _whole_coup_lost(tb: Table) -> None:
    tb.start()
    tb.cards("8S", "KD", "QS", "JD")
    tb.result()
    tb.cards("9H", "2D", "KC", "3C")
    tb.result()
    tb.cards("5H", "4S", "KH")  # coup 3's P1 B1 P2; its B2 and RESULT are lost,
    tb.gap(7)  # and coup 4 whole (4 cards and a RESULT)
    tb.cards("5C", "6D", "KD", "KS", "TC")  # coup 5: Banker 6-5
    tb.result()


# --- (a) an entered card the cards after it contradict ----------------------


def test_a_p3_entered_that_makes_the_dealt_b3_illegal_is_refused_and_the_right_one_settles() -> None:
    tb = Table()
    _unread_p3_then_b3(tb)
    before = len(tb.events)
    reply, out = tb.command(cmd="enter_card", coup=1, card="2H")
    assert reply == {"id": "c1", "ok": False, "error": REFUSED_2H}
    assert out == [] and len(tb.events) == before
    # confirm does not make it legal
    reply, _ = tb.command(cmd="enter_card", coup=1, card="2H", confirm=True)
    assert reply["error"] == REFUSED_2H
    # the right card: no consequence beyond it, so no confirm is needed
    reply, out = tb.command(cmd="enter_card", coup=1, card="7D")
    assert reply == {"id": "c1", "ok": True, "error": None}
    assert _brief(out) == [
        ("card", 1, "P3", "7D", None),
        ("misdeal", 1, None, None, "UNREAD_CARD"),
        ("card", 1, "B3", "9S", None),
        ("coup.result", 1, None, None, None),
    ]
    (result,) = tb.of_type("coup.result")
    assert (result["winner"], result["banker"]["total"], result["player"]["total"]) == ("banker", 5, 2)
    # settled: a further entry is refused, naming the command that corrects it
    reply, _ = tb.command(cmd="enter_card", coup=1, card="7D")
    assert reply["error"] == "coup 1 is settled; a correction is `ctl correct`"


def test_a_card_entered_that_makes_a_natural_before_a_dealt_card_is_refused() -> None:
    tb = Table()
    tb.start()
    tb.cards("3H", "4D", "2S")
    tb.card(None)  # B2 unread
    tb.card("9S")  # a fifth card: so the hand was not complete
    tb.result()
    reply, out = tb.command(cmd="enter_card", coup=1, card="5C")  # Banker 4 + 5: a natural 9
    assert (reply["ok"], out) == (False, [])
    assert reply["error"] == (
        "5C as B2 gives the Banker a natural 9, yet a 5th card 9S was dealt in coup 1 before its RESULT"
    )
    assert tb.command(cmd="enter_card", coup=1, card="KC")[0]["ok"]  # Banker 4: the 9S is P3


def test_a_card_missing_from_the_shoe_is_still_refused_first() -> None:
    tb = Table(decks=1)
    tb.start()
    tb.cards("3H", "4D", "2S", "2D")
    tb.card(None)
    tb.card("9S")
    tb.result()
    reply, _ = tb.command(cmd="enter_card", coup=1, card="3H")  # the one 3H was dealt as P1
    assert reply["error"] == "3H: no copy of it is left in this shoe"


def test_with_the_automatic_boundary_the_same_entry_waits_for_confirm_and_says_what_it_would_do() -> None:
    # no RESULT tells where the coup ends: 2H is legal, but it sets the
    # cards dealt after it aside; nothing is applied until it is confirmed
    tb = Table(coup_boundary="auto")
    tb.start()
    tb.cards("3H", "4D", "2S", "2D")
    tb.card(None)
    tb.card("9S")
    before = len(tb.events)
    reply, out = tb.command(cmd="enter_card", coup=1, card="2H")
    assert (reply["ok"], out, len(tb.events)) == (False, [], before)
    assert reply["would"] == ["set 9S aside as an extra card of coup 1", "settle coup 1 Player 7-6"]
    assert reply["error"] == (
        "not applied: enter_card 2H for coup 1 would set 9S aside as an extra card of coup 1;"
        " settle coup 1 Player 7-6; send again with confirm"
    )
    assert tb.engine.shoe is not None and tb.engine.shoe.coups[1].cards[-1] is None  # still unread
    reply, out = tb.command(cmd="enter_card", coup=1, card="2H", confirm=True)
    assert reply == {"id": "c1", "ok": True, "error": None}
    assert ("card", 1, "extra", "9S", None) in _brief(out)
    assert tb.last("coup.result")["winner"] == "player"


# --- (b) an accept the cards since the loss contradict -----------------------


def test_accept_of_a_coup_whose_end_the_frames_lost_must_hold_is_refused() -> None:
    tb = Table()
    _whole_coup_lost(tb)
    before = len(tb.events)
    reply, out = tb.command(cmd="accept", coup=3)
    assert reply == {"id": "c1", "ok": False, "error": REFUSED_ACCEPT_3}
    assert out == [] and len(tb.events) == before and not tb.of_type("coup.result")[2:]
    # what the reason says to do: void it, then number the next coup
    assert tb.command(cmd="void", coup=3, reason="frames lost")[0]["ok"]
    # coup 5 counted lost whole (void): beyond the command, so confirmed first
    reply, out = tb.command(cmd="accept", coup=6)
    assert (reply["ok"], out) == (False, [])
    assert reply["error"] == (
        "not applied: accept 6 would count coup 5 void (lost whole) and number the next coup 6;"
        " send again with confirm"
    )
    reply, out = tb.command(cmd="accept", coup=6, confirm=True)
    assert reply["ok"] and [e["code"] for e in out] == ["COUP_NUMBERING_RESTORED"]
    tb.cards("9C", "2H", "KS", "3D")
    tb.result()
    assert [e["coup"] for e in tb.of_type("coup.result")] == [1, 2, 6]


def test_accept_of_a_gap_the_cards_since_can_fit_needs_no_confirm() -> None:
    # one frame lost inside coup 1 (its P2), then B2: the coup's own
    tb = Table()
    tb.start()
    tb.cards("6S", "7C")
    tb.gap(1)
    tb.card("QD")
    reply, out = tb.command(cmd="accept", coup=1)
    assert reply == {"id": "c1", "ok": True, "error": None}
    assert ("card", 1, "P2", "QD", None) in _brief(out)


# --- the command's field, and a journal written before it -------------------


@pytest.mark.parametrize("value", [1, 0, "true", None, [True]])
def test_confirm_must_be_a_boolean(value: Any) -> None:
    for cmd in ({"cmd": "enter_card", "coup": 1, "card": "2H"}, {"cmd": "accept", "coup": 1}):
        with pytest.raises(CommandError) as exc:
            parse_command(json.dumps({"id": "a", **cmd, "confirm": value}).encode())
        assert str(exc.value) == f"{cmd['cmd']}: 'confirm' must be true or false"


def test_confirm_is_taken_by_entries_only() -> None:
    assert parse_command(b'{"id":"a","cmd":"enter_card","coup":1,"card":"2h","confirm":true}') == EnterCard(
        id="a", coup=1, card="2H", confirm=True
    )
    with pytest.raises(CommandError, match="void: unknown field 'confirm'"):
        parse_command(b'{"id":"a","cmd":"void","coup":1,"reason":"","confirm":true}')


def test_an_entry_is_journalled_with_its_confirm_and_re_fed_as_it_was_sent() -> None:
    live = parse_command(b'{"id":"a","cmd":"enter_card","coup":1,"card":"2H"}')
    stored = command_json(live)
    # (null: not sent; a journal row without it was written before confirm existed)
    assert json.loads(stored) == {"id": "a", "cmd": "enter_card", "coup": 1, "card": "2H", "confirm": None}
    again = parse_journalled(stored)
    assert type(again) is EnterCard and again == live
    for sent in (True, False):
        cmd = parse_command(json.dumps({"id": "a", "cmd": "accept", "coup": 1, "confirm": sent}).encode())
        assert parse_journalled(command_json(cmd)) == cmd
    with pytest.raises(CommandError, match="'confirm' must be true or false"):  # (live: a boolean)
        parse_command(b'{"id":"a","cmd":"accept","coup":1,"confirm":null}')
    # re-fed, it is refused as it was live
    tb = Table()
    _unread_p3_then_b3(tb)
    assert tb.engine.command(again, tb.t + 1)[0]["error"] == REFUSED_2H


def test_an_entry_journalled_before_confirm_existed_is_re_fed_as_it_was_taken() -> None:
    # a journal written before this change holds the accepted 2H: a rebuild
    # must reproduce what it did then, event for event
    old = parse_journalled(b'{"id":"a","cmd":"enter_card","coup":1,"card":"2H","ts":1.0}')
    assert isinstance(old, EnterCardAsTaken)
    assert command_json(old) == b'{"id":"a","cmd":"enter_card","coup":1,"card":"2H","ts":1.0}'
    assert isinstance(parse_journalled(b'{"id":"b","cmd":"accept","coup":3}'), AcceptAsTaken)
    tb = Table()
    _unread_p3_then_b3(tb)
    reply, out = tb.engine.command(old, tb.t + 1)
    assert reply["ok"] is True
    assert _brief(out) == [
        ("card", 1, "P3", "2H", None),
        ("misdeal", 1, None, None, "UNREAD_CARD"),
        ("card", 1, "extra", "9S", None),
        ("misdeal", 1, None, None, "EXTRA_CARD"),
        ("coup.result", 1, None, None, None),
    ]
    tb2 = Table()
    _whole_coup_lost(tb2)
    assert tb2.engine.command(parse_journalled(b'{"id":"b","cmd":"accept","coup":3}'), tb2.t + 1)[0]["ok"]


# --- through ctl, against a daemon -------------------------------------------


def _capture(frames: list[Frame]) -> str:
    enc = Encoder()
    lines = ["# protocol=shoe-ascii/1 table=T01\n"]
    for f in frames:
        lines.append(f"{f.t:.3f} < {enc.encode(f).decode().strip()}\n")
    return "".join(lines)


def _frames(*items: Any) -> list[Frame]:
    out: list[Frame] = [Hello(T0, 0, "FAKE-1", "1.0", "000001")]
    seq = 0
    for item in items:
        if isinstance(item, int):  # frames lost on the line
            seq += item
            continue
        seq += 1
        t = T0 + seq
        if item == "RESULT":
            out.append(Button(t, seq, "RESULT"))
        elif item == "NEWSHOE":
            out.append(Button(t, seq, "NEWSHOE"))
        elif item == "OK":
            out.append(Status(t, seq, "OK"))
        else:
            out.append(Card(t, seq, None if item == "XX" else item))
    return out


@pytest.mark.mqtt
def test_ctl_refuses_the_contradicted_entries_and_applies_a_confirmed_one(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    sup = str(_supervisor(tmp_path, broker))
    # AS is the first card and burns 2C; coup 1's P3 passes unread, then B3 9S
    a = _frames("NEWSHOE", "AS", "2C", "3H", "4D", "2S", "2D", "XX", "9S", "RESULT")
    with _daemon(tmp_path, broker, _capture(a), sub):
        time.sleep(1.0)  # (the held 9S and RESULT are read right after the misdeal)
        r = ctl("enter-card", "--coup", "1", "--card", "2H", "-c", sup)
        assert (
            one_line_error(r, 1) == f"shoe-controller ctl: table T01 refused enter-card coup 1: {REFUSED_2H}"
        )
        r = ctl("enter-card", "--coup", "1", "--card", "7D", "-c", sup)
        assert (r.returncode, r.stdout) == (0, "coup 1: 7D entered as P3\n"), r.stderr
        assert sub.wait_for(lambda ms: any(m.topic == "baccarat/T01/coup/result" for m in ms), 20)
        result = json.loads(sub.on("baccarat/T01/coup/result")[0].payload)
        assert (result["winner"], result["banker"]["cards"]) == ("banker", ["4D", "2D", "9S"])
        r = ctl("enter-card", "--coup", "1", "--card", "7D", "-c", sup)
        assert one_line_error(r, 1).endswith("coup 1 is settled; a correction is `ctl correct`")

    other = tmp_path / "b"
    other.mkdir()
    broker2 = mosquitto()
    sub2 = subscriber(broker2, ["baccarat/T01/#"])
    sup2 = str(_supervisor(other, broker2))
    b = _frames(
        "NEWSHOE", "AS", "2C",
        "8S", "KD", "QS", "JD", "RESULT",
        "9H", "2D", "KC", "3C", "RESULT",
        "5H", "4S", "KH", 7,
        "5C", "6D", "KD", "KS", "TC", "RESULT",
    )  # fmt: skip
    with _daemon(other, broker2, _capture(b), sub2):
        time.sleep(1.0)
        r = ctl("accept", "--coup", "3", "-c", sup2)
        assert (
            one_line_error(r, 1)
            == f"shoe-controller ctl: table T01 refused accept coup 3: {REFUSED_ACCEPT_3}"
        )
        r = ctl("void", "--coup", "3", "--reason", "frames lost", "-c", sup2)
        assert r.returncode == 0, r.stderr
        # without --confirm: nothing applied, and ctl says what it would do
        r = ctl("accept", "--coup", "6", "-c", sup2)
        assert one_line_error(r, 1) == (
            "shoe-controller ctl: table T01 did not apply accept coup 6 (no --confirm):"
            " it would count coup 5 void (lost whole) and number the next coup 6"
        )
        r = ctl("accept", "--coup", "6", "-c", sup2, "--json")
        assert r.returncode == 1 and json.loads(r.stdout)["would"] == [
            "count coup 5 void (lost whole) and number the next coup 6"
        ]
        assert not any(
            b"COUP_NUMBERING_RESTORED" in m.payload for m in sub2.on("baccarat/T01/security/alert")
        )
        r = ctl("accept", "--coup", "6", "--confirm", "-c", sup2)
        assert r.returncode == 0, r.stderr
        assert sub2.wait_for(
            lambda ms: any(b"COUP_NUMBERING_RESTORED" in m.payload for m in ms if m.topic.endswith("alert")),
            20,
        )


def test_an_entry_that_reads_the_result_as_pressed_early_waits_for_confirm() -> None:
    # Player 7 stands; the Banker's B2 passes unread (really 2C: Banker 7,
    # a tie) and the dealer presses RESULT. A wrong KC would make the
    # Banker draw on 5: the RESULT the shoe saw read as an early one, and
    # the next card dealt (the next coup's) taken as B3. Told, not applied.
    # (When cards held after the RESULT are its due cards, the shoe itself
    # says it was pressed early: an entry then needs no confirm.)
    tb = Table()
    tb.start()
    tb.cards("KH", "5D", "7S")
    tb.card(None)
    tb.result()
    before = len(tb.events)
    reply, out = tb.command(cmd="enter_card", coup=1, card="KC")
    assert (reply["ok"], out, len(tb.events)) == (False, [], before)
    assert reply["would"] == ["read coup 1's RESULT as pressed early, the next card dealt taken as its B3"]
    # confirmed, it is the supervisor's word: applied, the RESULT taken as early
    reply, out = tb.command(cmd="enter_card", coup=1, card="KC", confirm=True)
    assert reply["ok"] is True
    assert [(e["code"], e["action"]) for e in out if e["type"] == "misdeal"] == [
        ("UNREAD_CARD", "corrected"),
        ("PREMATURE_RESULT", "awaiting_supervisor"),
    ]


# --- an accept of the next coup's number while frames are held ----------------


def _numbering_lost_with_frames_held() -> Engine:
    """Coup 2's RESULT and 5 more frames lost (coup 3 whole, or coup 3's
    first cards), then coup 4 and coup 5 dealt whole: the numbering is
    lost, and the engine's coup 3 (awaiting a supervisor, deadline 2 s)
    holds 10 frames, 8 cards and 2 RESULTs, that the shoe sent before
    any command."""
    from tests.test_dealer_model_regressions import coup_frames, engine, opening

    e = engine()
    frames = opening(["9S", "KH", "TS", "QH"])
    frames += [Card(T0, 9, "8D"), Card(T0, 10, "2C"), Card(T0, 11, "KD"), Card(T0, 12, "5C")]
    frames.append(SequenceGap(T0, 19, 13, 6))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    frames += coup_frames([["9D", "KC", "TH", "QD"]], seq=24, t=T0 + 1)
    out = [ev for f in frames for ev in e.feed(f)]
    assert [a["code"] for a in out if a["type"] == "security.alert"] == ["COUP_NUMBERING_LOST"]
    assert e.shoe is not None and e.shoe.current is not None and e.shoe.current.number == 3
    assert e.shoe.current.held and e.shoe.next_coup == 4
    return e


HELD = (
    "number the next coup {n} only after the 10 frames held behind coup 3 (8 cards, 2 RESULTs, all sent"
    " before this command) are dealt on: the coups they open stay void, their numbers unknown; those"
    " between the last of them and coup {n} are counted void (lost whole); if they open coup {n} or later,"
    " the numbering stays lost"
)
DEALT_ON = (
    "if coup 3 ends void (at its deadline or by a void), deal them on as coup 4 (void, its number unknown), "
)


@pytest.mark.parametrize(
    ("n", "then", "voids", "next_p1", "lost"),
    [
        (
            4,
            "so the numbering stays lost (the supervisor's number 4 came after frames held that were dealt"
            " as coups up to 4)",
            [3, 4, 5],
            5,
            True,
        ),
        (5, "then number the next coup 5 (no coup lost whole)", [3, 4], 5, False),
        (6, "then count coup 5 void (lost whole) and number the next coup 6", [3, 4, 5], 6, False),
        (
            7,
            "then 7 is out of range (the next coup is 5 to 6: 8 cards dealt since coup 3, and 6 frames were"
            " lost in this shoe: at most 3 coups of 4 cards), and the numbering stays lost",
            [3, 4, 5],
            5,
            True,
        ),
    ],
)
@pytest.mark.parametrize("ends", ["deadline", "void"])
def test_accept_of_a_number_while_frames_are_held_says_what_the_held_frames_will_do(
    n: int, then: str, voids: list[int], next_p1: int, lost: bool, ends: str
) -> None:
    # Before, the reply said "count coups 4 to 5 void (lost whole) and
    # number the next coup 6" (the held frames open coup 4 instead, void
    # with its number unknown), and accept 4 was applied without confirm
    # though the held frames open coup 4 and the numbering is lost again.
    e = _numbering_lost_with_frames_held()
    reply, out = e.command(Accept(id="a", coup=n), T0 + 1.5)
    assert out == [] and reply["ok"] is False
    assert reply["would"] == [HELD.format(n=n), DEALT_ON + then]
    assert (
        reply["error"]
        == f"not applied: accept {n} would {'; '.join(reply['would'])}; send again with confirm"
    )
    # confirmed, then what the reply said happens, event for event
    reply, _ = e.command(Accept(id="a", coup=n, confirm=True), T0 + 1.5)
    assert reply["ok"] is True
    if ends == "deadline":
        out = e.tick(T0 + 10)
    else:
        reply, out = e.command(Void(id="v", coup=3, reason="frames lost"), T0 + 1.8)
        assert reply["ok"] is True
    out += e.feed(Card(T0 + 11, 29, "8C"))
    assert [v["coup"] for v in out if v["type"] == "coup.void"] == voids
    lost_whole = [v["coup"] for v in out if v["type"] == "coup.void" and v["detail"].startswith("lost whole")]
    assert lost_whole == ([5] if n == 6 else [])
    assert [(c["coup"], c["card"]) for c in out if c["type"] == "card" and c["position"] == "P1"] == [
        (4, "9D"),
        (next_p1, "8C"),
    ]
    assert e.shoe is not None and (e.shoe.numbering_lost is not None) is lost


@pytest.mark.mqtt
def test_ctl_says_what_an_accept_given_while_frames_are_held_will_do(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    # the shoe of _numbering_lost_with_frames_held, replayed by a real
    # daemon; ctl accept --coup 6 without --confirm, through the broker
    broker = mosquitto()
    sub = subscriber(broker, ["baccarat/T01/#"])
    sup = str(_supervisor(tmp_path, broker))
    frames = _frames(
        "NEWSHOE", "AS", "2S",
        "9S", "KH", "TS", "QH", "RESULT",
        "8D", "2C", "KD", "5C", 6,
        "7H", "7D", "TC", "JS", "RESULT",
        "9D", "KC", "TH", "QD", "RESULT",
    )  # fmt: skip
    with _daemon(tmp_path, broker, _capture(frames), sub):
        assert sub.wait_for(
            lambda ms: any(
                m.topic == "baccarat/T01/security/alert" and b"COUP_NUMBERING_LOST" in m.payload for m in ms
            ),
            30,
        )
        time.sleep(1.0)  # (the held frames are read right after the alert)
        r = ctl("accept", "--coup", "6", "-c", sup)
        assert one_line_error(r, 1) == (
            "shoe-controller ctl: table T01 did not apply accept coup 6 (no --confirm): it would "
            + HELD.format(n=6)
            + "; "
            + DEALT_ON
            + "then count coup 5 void (lost whole) and number the next coup 6"
        )
        assert not any(b"COUP_NUMBERING_RESTORED" in m.payload for m in sub.on("baccarat/T01/security/alert"))
