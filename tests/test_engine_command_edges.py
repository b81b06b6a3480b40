"""Cases a random walk of frames and commands over the engine's state
tables found (``tests/test_engine_transitions.py``), each fed to the engine
as frames and supervisor commands (``tests.table.Table``).

- The due card after an early RESULT, unread, then entered by a supervisor:
  it was dealt, so the early RESULT is corrected and the coup settled, as
  when the due card is read (``boundary.after_card``); before, the early
  RESULT stayed open and voided the complete coup at its deadline.
- A frame lost before a shoe's first card opens coup 1 (held: the frames
  lost may be burn cards); once the gap is accepted, the burn goes on with
  coup 1 as the coup it precedes. A read first card kept it so; an unread
  one opened coup 2 and left coup 1 open with no card until the shoe ended.
- A coup already void awaits no supervisor (``dealing.deal_void``,
  ``loss.on_gap`` on a void coup): an unread first card in one opens no
  ``UNREAD_CARD``; the burn ends there, unchecked, and the void coup is
  dealt on until its RESULT.
- (found by ``python -m fuzz fuzz_engine`` while checking these) a misdeal
  that would void a coup already void reports nothing: a ``misdeal`` void
  with no ``coup.void`` after it broke the engine harness's invariant; so
  did a gap that opened a coup past the last one (void at once) to await a
  supervisor, when the supervisor's numbering had passed the last coup.
"""

from __future__ import annotations

from typing import Any

from firmware_protocols.frames import DeviceResult
from tests.table import Table

PLAYER_DRAWS = ("TS", "7C", "KH", "QD")  # Player 0 draws; Banker 7 stands whatever P3 is
NATURAL = ("9S", "2C", "KH", "3D")


def _misdeals(tb: Table) -> list[tuple[int, str, str]]:
    return [(e["coup"], e["code"], e["action"]) for e in tb.of_type("misdeal")]


def _results(tb: Table) -> list[tuple[int, list[str], list[str], list[str]]]:
    return [
        (e["coup"], e["player"]["cards"], e["banker"]["cards"], e["corrections"])
        for e in tb.of_type("coup.result")
    ]


def _no_wait_on_a_void_coup(tb: Table) -> None:
    void: set[int] = set()
    for e in tb.events:
        if e["type"] == "coup.void":
            void.add(e["coup"])
        elif e["type"] == "misdeal" and e["action"] == "awaiting_supervisor":
            assert e["coup"] not in void, f"coup {e['coup']} is void and awaits a supervisor: {e}"


def _early_result_then_unread_due_card() -> Table:
    tb = Table()
    tb.start()
    tb.cards(*PLAYER_DRAWS)
    tb.result()  # P3 still due: PREMATURE_RESULT awaiting
    tb.card(None)  # the due card, unread
    return tb


# --- 1. the due card after an early RESULT, entered ------------------------


def test_the_due_card_entered_after_an_early_result_corrects_it_and_settles_the_coup() -> None:
    tb = _early_result_then_unread_due_card()
    reply, out = tb.command(cmd="enter_card", coup=1, card="4H")
    assert reply["ok"], reply
    assert [(e["type"], e.get("code"), e.get("action")) for e in out] == [
        ("card", None, None),
        ("misdeal", "UNREAD_CARD", "corrected"),
        ("misdeal", "PREMATURE_RESULT", "corrected"),
        ("coup.result", None, None),
    ]
    assert out[2]["detail"] == "the due card was dealt after an early RESULT"
    assert _results(tb) == [(1, ["TS", "KH", "4H"], ["7C", "QD"], ["UNREAD_CARD", "PREMATURE_RESULT"])]
    # the dealer's second RESULT, as after a due card read; then coup 2
    assert tb.result() == []
    tb.cards(*NATURAL)
    tb.result()
    tb.tick(130)
    assert not tb.of_type("coup.void")
    assert [r[0] for r in _results(tb)] == [1, 2]
    assert (1, "PREMATURE_RESULT", "void") not in _misdeals(tb)


def test_an_entered_due_card_settles_as_the_same_card_read_does() -> None:
    read = Table()
    read.start()
    read.cards(*PLAYER_DRAWS)
    read.result()
    read.card("4H")
    read.result()
    read.cards(*NATURAL)
    read.result()
    entered = _early_result_then_unread_due_card()
    entered.command(cmd="enter_card", coup=1, card="4H")
    entered.result()
    entered.cards(*NATURAL)
    entered.result()

    def hands(tb: Table) -> list[tuple[Any, ...]]:
        return [(c, p, b) for c, p, b, _ in _results(tb)]

    assert hands(entered) == hands(read)
    assert [e["winner"] for e in entered.of_type("coup.result")] == [
        e["winner"] for e in read.of_type("coup.result")
    ]


def test_the_due_card_entered_after_the_result_that_closed_the_coup_settles_it() -> None:
    # the unread due card cannot change the tableau (Banker 7 stands), so
    # the next RESULT closes the coup; entering the card settles it
    tb = _early_result_then_unread_due_card()
    tb.result()
    assert not tb.of_type("coup.result")
    reply, _ = tb.command(cmd="enter_card", coup=1, card="4H")
    assert reply["ok"], reply
    assert _misdeals(tb)[-2:] == [(1, "UNREAD_CARD", "corrected"), (1, "PREMATURE_RESULT", "corrected")]
    assert _results(tb) == [(1, ["TS", "KH", "4H"], ["7C", "QD"], ["UNREAD_CARD", "PREMATURE_RESULT"])]
    # the next coup opens at once: no second RESULT is awaited
    tb.cards(*NATURAL)
    tb.result()
    tb.tick(130)
    assert [r[0] for r in _results(tb)] == [1, 2]
    assert not tb.of_type("coup.void")


def test_the_due_card_entered_releases_what_was_held_behind_it_after_the_coup_settles() -> None:
    # Player 0, Banker 3: the unread P3 decides whether Banker draws, so
    # the RESULT and the next coup's cards are held until it is entered
    tb = Table()
    tb.start()
    tb.cards("TS", "3C", "KH", "QD")
    tb.result()
    tb.card(None)
    tb.result()
    tb.cards(*NATURAL)
    tb.result()
    assert not tb.of_type("coup.result")
    reply, _ = tb.command(cmd="enter_card", coup=1, card="8H")  # an 8: Banker 3 stands
    assert reply["ok"], reply
    assert _results(tb) == [
        (1, ["TS", "KH", "8H"], ["3C", "QD"], ["UNREAD_CARD", "PREMATURE_RESULT"]),
        (2, ["9S", "KH"], ["2C", "3D"], []),
    ]
    tb.tick(130)
    assert not tb.of_type("coup.void")


# --- 2 and 3. a frame lost before the first card ---------------------------


def test_an_unread_first_card_after_an_accepted_gap_is_held_by_coup_1() -> None:
    tb = Table()
    tb.hello()
    tb.new_shoe()
    tb.gap(1)
    tb.card(None)  # held by coup 1, which the gap opened
    reply, _ = tb.command(cmd="accept", coup=1)
    assert reply["ok"], reply
    assert _misdeals(tb)[-1] == (1, "UNREAD_CARD", "awaiting_supervisor")
    reply, _ = tb.command(cmd="enter_card", coup=1, card="2S")
    assert reply["ok"], reply
    tb.cards("4C", "5D")  # the burn: two cards
    tb.cards(*NATURAL)
    tb.result()
    assert tb.last("shoe.burn")["first_card"] == "2S"
    assert _results(tb) == [(1, ["9S", "KH"], ["2C", "3D"], ["SEQUENCE_GAP", "UNREAD_CARD"])]
    assert sorted(tb.engine.shoe.coups) == []  # type: ignore[union-attr]


def test_a_gap_before_the_first_card_then_the_cut_card_leaves_no_coup_without_cards() -> None:
    # the reporter's walk: a lost frame, the cut card (after_cut: last),
    # an unread first card, accept, a new shoe
    tb = Table(after_cut="last")
    tb.hello()
    tb.new_shoe()
    tb.gap(1)
    tb.cut()
    tb.card(None)
    reply, _ = tb.command(cmd="accept", coup=1)
    assert reply["ok"], reply
    # the cut card came with coup 1 not yet dealt: coup 1 is the last, and
    # the unread first card is its burn's, not an overrun coup's
    assert not [m for m in _misdeals(tb) if m[1] == "CUT_CARD_OVERRUN"]
    assert _misdeals(tb)[-1] == (1, "UNREAD_CARD", "awaiting_supervisor")
    tb.new_shoe()
    _no_wait_on_a_void_coup(tb)
    ended = tb.of_type("shoe.ended")
    assert [e["coups"] for e in ended] == [1]
    assert [(e["coup"], e["code"]) for e in tb.of_type("coup.void")] == [(1, "SHOE_ENDED")]


def test_the_cut_card_case_deals_coup_1_once_its_first_card_is_entered() -> None:
    tb = Table(after_cut="last")
    tb.hello()
    tb.new_shoe()
    tb.gap(1)
    tb.cut()
    tb.card(None)
    tb.command(cmd="accept", coup=1)
    reply, _ = tb.command(cmd="enter_card", coup=1, card="AS")
    assert reply["ok"], reply
    tb.card("4C")  # the burn: one card
    tb.cards(*NATURAL)
    tb.result()
    assert [r[0] for r in _results(tb)] == [1]
    assert tb.last("shoe.ended")["reason"] == "last coup dealt"
    assert not tb.of_type("coup.void")


def test_an_unread_first_card_in_a_coup_already_void_awaits_no_supervisor() -> None:
    # the gap's coup accepted, then voided by the supervisor during the burn
    tb = Table()
    tb.hello()
    tb.new_shoe()
    tb.gap(1)
    tb.command(cmd="accept", coup=1)
    reply, _ = tb.command(cmd="void", coup=1, reason="test")
    assert reply["ok"], reply
    tb.card(None)  # the first card, unread: the burn cannot be counted
    _no_wait_on_a_void_coup(tb)
    assert not [m for m in _misdeals(tb) if m[1] == "UNREAD_CARD"]
    alert = tb.last("security.alert")
    assert alert["code"] == "BURN_MISMATCH" and alert["coup"] == 1
    burn = tb.last("shoe.burn")
    assert (burn["first_card"], burn["burned"]) == (None, 0)
    # the burn and coup 1's cards are the void coup's until its RESULT; the
    # shoe is dealt on from coup 2
    tb.cards("4C", "5D", "6H", "7S")
    tb.result()
    tb.cards(*NATURAL)
    tb.result()
    assert [(e["coup"], e["code"]) for e in tb.of_type("coup.void")] == [(1, "SUPERVISOR_VOID")]
    assert _results(tb) == [(2, ["9S", "KH"], ["2C", "3D"], [])]
    assert tb.engine.shoe.phase == "deal"  # type: ignore[union-attr]


# --- 4. a misdeal that voids a coup already void ---------------------------


def test_a_quit_announced_for_a_coup_already_void_reports_no_second_void() -> None:
    # (capture hold_void_coup_early_result_next_void shows the other way
    # there: an early RESULT's next coup, void already)
    tb = Table(decks=1)
    tb.start()
    tb.cards("9S", "9S")  # a second 9S in a one-deck shoe: FOREIGN_CARD, void
    tb.t += 1
    tb.seq += 1
    tb.feed(DeviceResult(tb.t, tb.seq, "quit", False, False))
    voiding = [(c, code) for c, code, action in _misdeals(tb) if action == "void"]
    assert voiding == [(e["coup"], e["code"]) for e in tb.of_type("coup.void")] == [(1, "FOREIGN_CARD")]


def test_a_gap_when_the_supervisors_numbering_passes_the_last_coup_opens_no_coup() -> None:
    # the numbering lost at coup 2's deadline; the cut card makes coup 3
    # the last; the supervisor says the next coup is 4 (coup 3 lost whole):
    # a frame lost now is after the last coup, as with no numbering given
    tb = Table(after_cut="last")
    tb.start()
    tb.cards(*NATURAL)
    tb.result()
    tb.gap(5)
    tb.cards("7H", "7D", "TC", "JS")
    tb.result()
    tb.tick(130)
    tb.cut()
    reply, _ = tb.command(cmd="accept", coup=4, confirm=True)  # (coup 3 counted lost whole)
    assert reply["ok"], reply
    out = tb.gap(1)
    assert [(e["type"], e["code"], e["coup"]) for e in out] == [("security.alert", "SEQUENCE_GAP", None)]
    assert out[0]["detail"].endswith("after the last coup")
    tb.cards(*NATURAL)  # coup 3 counted void, the shoe ends, coup 4 overruns it
    _no_wait_on_a_void_coup(tb)
    assert [(e["coup"], e["code"]) for e in tb.of_type("coup.void")][-2:] == [
        (3, "SEQUENCE_GAP"),
        (4, "CUT_CARD_OVERRUN"),
    ]


def test_accept_on_a_coup_awaiting_only_an_unread_card_points_to_enter_card() -> None:
    tb = Table()
    tb.start()
    tb.cards("TS", "7C")
    tb.card(None)  # P2 passes the reader unread: UNREAD_CARD, nothing to accept
    assert _misdeals(tb)[-1] == (1, "UNREAD_CARD", "awaiting_supervisor")
    reply, _ = tb.command(cmd="accept", coup=1)
    assert not reply["ok"]
    assert reply["error"] == (
        "coup 1 has nothing a supervisor can accept: it awaits a card (UNREAD_CARD);"
        " enter it with enter_card (ctl enter-card --coup 1 --card CARD) or void the coup"
    )
    # and the entry it points to is taken
    reply, _ = tb.command(cmd="enter_card", coup=1, card="KH")
    assert reply["ok"], reply
