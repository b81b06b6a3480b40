"""What one input can make the engine do, and hold.

* ``accept`` with a coup number while the numbering is lost: the number must
  be one the frames lost (and the cards left) can account for, so the card
  after it voids a bounded number of coups lost whole; a stored command that
  is now refused is refused the same way when the journal is re-fed, and a
  checkpoint holding one accepted before is refused at the next coup.
* A device restart (HELLO) after a disconnect leaves the ``DEVICE_FAULT`` to
  the supervisor: the next frame is no proof of an unbroken sequence.
* A coup holds at most ``MAX_HELD`` frames; the frame past that voids it as
  its deadline would, and nothing more is buffered.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller import checkpoint
from controller.cards import RANK_BURN
from controller.commands_schema import Accept
from controller.config import load_config
from controller.daemon import Daemon
from controller.engine import MAX_HELD, MAX_LISTED_EXTRAS, ORDER, Coup, Engine, loss, tableau
from controller.events import Event
from controller.journal import Journal
from controller.rules import load_profile
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Button, Card, Frame, Hello, Link, SequenceGap, Status
from firmware_protocols.shoe_ascii import Encoder
from tests.support.frames import T0, coup_frames, engine


def numbering_lost(*, restart: bool = False) -> list[Frame]:
    """Coups 1 and 2 are naturals; five frames are lost (a whole coup, or the
    first cards of the next: both fit), then four cards and a RESULT. The
    numbering is lost; the engine's next coup is 4. ``restart``: the device
    restarts after that (a loss of unknown size)."""
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S")]  # an ace exposed, one card burned
    frames += coup_frames([["9S", "KH", "TS", "QH"]], seq=4)
    frames += coup_frames([["8D", "2C", "KD", "5C"]], seq=9)
    frames.append(SequenceGap(T0, 19, 14, 5))
    frames += coup_frames([["7H", "7D", "TC", "JS"]], seq=19)
    if restart:
        frames.append(Hello(T0 + 3, 0, "FAKE", "1.0", "1"))
    return frames


NEXT_CARD = Card(T0 + 11, 24, "8C")  # the first card after the supervisor's number


def lost(e: Engine, frames: list[Frame]) -> list[Event]:
    out = [ev for f in frames for ev in e.feed(f)] + e.tick(T0 + 10)
    assert [a["code"] for a in out if a["type"] == "security.alert"] == ["COUP_NUMBERING_LOST"]
    assert e.shoe is not None and e.shoe.next_coup == 4
    return out


def accept(e: Engine, coup: int) -> tuple[dict[str, Any], list[Event]]:
    # typed, so that the engine's own bound is what is tested (the command
    # parser refuses a coup above 1000 before it reaches the engine)
    # (confirmed: the coups it counts lost whole are beyond the command itself)
    return e.command(Accept(id="a", coup=coup, confirm=True), T0 + 10)


def lost_whole(events: list[Event]) -> list[int]:
    """Coups voided as lost whole by the supervisor's numbering."""
    return [v["coup"] for v in events if v["type"] == "coup.void" and v["detail"].startswith("lost whole")]


# --- item 1: accept with a coup number -----------------------------------------


def test_accept_is_bounded_by_the_coups_the_cards_since_the_loss_can_make() -> None:
    # Since coup 3 (the first whose number may be wrong) four cards were dealt
    # and five frames lost: nine cards at most, two coups, so the next coup is
    # 4 or 5; 6 and the 20,000 of the report are refused and change nothing.
    e = engine()
    lost(e, numbering_lost())
    for n in (20000, 6):
        reply, out = accept(e, n)
        assert reply["ok"] is False and out == []
        assert reply["error"] == (
            f"coup {n} is not plausible: the next coup is 4 to 5 (4 cards dealt since coup 3, "
            "and 5 frames were lost in this shoe: at most 2 coups of 4 cards)"
        )
    assert e.shoe is not None and e.shoe.numbering_lost is not None and e.shoe.renumber_to is None
    reply, out = accept(e, 3)
    assert reply["error"] == "coup numbers below 4 are taken: the next coup is 4 to 5"
    reply, out = accept(e, 5)  # at the bound
    assert reply["ok"] is True
    out = e.feed(NEXT_CARD)
    assert lost_whole(out) == [4]
    assert [(c["coup"], c["position"]) for c in out if c["type"] == "card"] == [(5, "P1")]


def test_after_a_restart_every_unseen_card_counts_and_the_burst_stays_bounded() -> None:
    # The device restarted after: it may have lost any number of frames, so
    # the 4 cards dealt since coup 3 and the 402 the engine has not seen make
    # at most 101 coups: the next coup is 4 to 104. At the bound, the next
    # card voids exactly the 100 coups in between (two events each) and
    # publishes the odds once, for coup 104.
    e = engine(odds=True)
    lost(e, numbering_lost(restart=True))
    assert e.shoe is not None and e.shoe.comp.cards_left == 402
    reply, out = accept(e, 105)
    assert reply["error"] == (
        "coup 105 is not plausible: the next coup is 4 to 104 "
        "(4 cards dealt since coup 3, "
        "and frames were lost in this shoe in a number that cannot be known: at most 101 coups of 4 cards)"
    )
    assert out == []
    reply, out = accept(e, 104)
    assert reply["ok"] is True
    assert [(a["code"], a["coup"]) for a in out] == [("COUP_NUMBERING_RESTORED", 104)]
    out = e.feed(NEXT_CARD)
    assert lost_whole(out) == list(range(4, 104))
    kinds: dict[str, int] = {}
    for ev in out:
        kinds[ev["type"]] = kinds.get(ev["type"], 0) + 1
    assert kinds == {"misdeal": 100, "coup.void": 100, "odds.update": 2, "card": 1}
    assert {o["coup"] for o in out if o["type"] == "odds.update"} == {104}
    assert [(c["coup"], c["position"]) for c in out if c["type"] == "card"] == [(104, "P1")]


def test_a_gap_of_unknown_size_counts_every_unseen_card_as_a_restart_does() -> None:
    # An Angel Eye gap that can only prove one frame lost (a whole seq cycle
    # may hide behind it) bounds nothing: like a device restart, every card
    # the engine has not seen may be among the lost frames.
    e = engine()
    lost(e, [*numbering_lost(), SequenceGap(T0 + 3, 30, 24, 1, exact=False)])
    assert e.shoe is not None and e.shoe.comp.cards_left == 402
    reply, _ = accept(e, 105)
    assert reply["error"] == (
        "coup 105 is not plausible: the next coup is 4 to 104 "
        "(4 cards dealt since coup 3, "
        "and frames were lost in this shoe in a number that cannot be known: at most 101 coups of 4 cards)"
    )
    assert accept(e, 104)[0]["ok"] is True


def test_an_accept_refused_now_is_refused_the_same_way_when_re_fed() -> None:
    # The engine is deterministic: re-fed after a restart, a stored implausible
    # accept gives the same refusal and the same events as live.
    runs = []
    for _ in range(2):
        e = engine()
        events = lost(e, numbering_lost())
        reply, out = accept(e, 20000)
        runs.append((reply, events + out + e.feed(NEXT_CARD)))
    assert runs[0] == runs[1]
    assert runs[0][0]["ok"] is False
    assert lost_whole(runs[0][1]) == []


def test_a_checkpoint_holding_an_implausible_number_accepted_before_refuses_it_at_the_next_coup() -> None:
    # A checkpoint taken between an accept of a number no shoe can reach
    # (taken by a version that did not check it, with no window kept) and
    # the next card: it is refused there, the numbering stays lost.
    e = engine()
    lost(e, numbering_lost())
    assert e.shoe is not None
    e.shoe.numbering_lost, e.shoe.renumber_to, e.shoe.window = None, 20000, None
    _, e2, _ = checkpoint.load(checkpoint.dump(1, e, None), engine, lambda: None)
    out = e2.feed(NEXT_CARD)
    assert lost_whole(out) == []
    (alert,) = [a for a in out if a["type"] == "security.alert"]
    assert alert["code"] == "COMMAND_REJECTED"
    assert alert["detail"] == (
        "accept 20000: the next coup is 4 to 108 (a shoe of 416 cards has at most 104 coups); "
        "the numbering stays lost"
    )
    assert [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void"] == [(4, "SEQUENCE_GAP")]
    assert e2.shoe is not None and e2.shoe.numbering_lost is not None


def _journal_config(tmp_path: Path) -> Path:
    cfg = {
        "table": "T01",
        "profile": "punto_banco",
        "decks": 8,
        "device": {"driver": "serial", "port": "/dev/null", "protocol": "shoe-ascii/1"},
        "journal": str(tmp_path / "journal.sqlite3"),
        "odds": False,
        "rules": {"correction_deadline_s": 2},
        "outputs": {"stdout": False, "jsonl": str(tmp_path / "events.jsonl")},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_journalled_implausible_accept_is_refused_when_the_daemon_rebuilds(tmp_path: Path) -> None:
    # The report's crash loop: the accept was stored, and every restart
    # re-fed it. Re-fed now, it is refused and the next card voids nothing.
    cfg = load_config(_journal_config(tmp_path))
    enc = Encoder()
    with Journal(cfg.journal) as journal:
        for f in numbering_lost():
            if not isinstance(f, SequenceGap):  # (the decoder sees the skipped numbers)
                journal.append_input(T0, "rx", enc.encode(f))
        journal.append_input(T0 + 10, "tick", b"")
        cmd = {"id": "a", "cmd": "accept", "coup": 20000}
        journal.append_input(T0 + 10, "cmd", json.dumps(cmd).encode())
        journal.append_input(T0 + 11, "rx", enc.encode(NEXT_CARD))
        daemon = Daemon(cfg)
        daemon._rebuild(journal)
        assert daemon.last_reply is not None and daemon.last_reply["ok"] is False
        # read back through the command parser: refused by its bound on 'coup'
        assert "'coup' must be an integer from 1 to 1000" in str(daemon.last_reply["error"])
        events = [json.loads(p.json) for p in journal.events_since(0)]
    assert len(events) < 60
    assert lost_whole(events) == []


# --- item 7: a restart leaves the fault to the supervisor ----------------------


def fault_then_restart() -> list[Frame]:
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S"), Card(T0, 4, "9S"), Card(T0, 5, "KH")]
    return frames


def fault_codes(events: list[Event]) -> list[tuple[str, str]]:
    return [(m["code"], m["action"]) for m in events if m["type"] == "misdeal"]


@pytest.mark.parametrize("after", ["frame", "STAT OK"])
def test_a_restart_after_a_disconnect_leaves_the_device_fault_to_the_supervisor(after: str) -> None:
    e = engine()
    events = [ev for f in fault_then_restart() for ev in e.feed(f)]
    events += e.feed(Link(T0 + 0.1, None, False, "gone"))
    events += e.feed(Link(T0 + 0.2, None, True, "back"))
    events += e.feed(Hello(T0 + 0.3, 0, "FAKE", "1.0", "1"))
    nxt: Frame = Card(T0 + 0.4, 1, "TS") if after == "frame" else Status(T0 + 0.4, 1, "OK")
    events += e.feed(nxt)
    assert fault_codes(events) == [
        ("DEVICE_FAULT", "awaiting_supervisor"),
        ("SEQUENCE_GAP", "awaiting_supervisor"),
    ]
    assert e.shoe is not None and set(e.shoe.coups[1].open) == {"DEVICE_FAULT", "SEQUENCE_GAP"}
    reply, out = e.command({"id": "a", "cmd": "accept", "coup": 1}, T0 + 1)
    assert reply["ok"] is True
    assert [(m["code"], m["detail"]) for m in out if m["type"] == "misdeal"] == [
        ("SEQUENCE_GAP", "accepted by supervisor"),
        ("DEVICE_FAULT", "accepted by supervisor"),
    ]


def test_a_jam_then_a_restart_is_not_cleared_by_stat_ok() -> None:
    e = engine()
    events = [ev for f in fault_then_restart() for ev in e.feed(f)]
    for f in (Status(T0 + 0.1, 6, "JAM"), Hello(T0 + 0.2, 0, "F", "1", "1"), Status(T0 + 0.3, 1, "OK")):
        events += e.feed(f)
    assert ("DEVICE_FAULT", "corrected") not in fault_codes(events)
    assert e.shoe is not None and "DEVICE_FAULT" in e.shoe.coups[1].open


def test_a_reconnect_with_an_unbroken_sequence_still_corrects_the_fault() -> None:
    # (the case docs/dealing-errors.md keeps: no restart, no gap)
    e = engine()
    events = [ev for f in fault_then_restart() for ev in e.feed(f)]
    for f in (Link(T0 + 0.1, None, False, ""), Link(T0 + 0.2, None, True, ""), Card(T0 + 0.3, 6, "TS")):
        events += e.feed(f)
    assert fault_codes(events) == [("DEVICE_FAULT", "awaiting_supervisor"), ("DEVICE_FAULT", "corrected")]


def test_the_restart_bytes_through_the_decoder_leave_the_fault_open() -> None:
    # the bytes a shoe-ascii/1 device sends: two cards, (line down, up), its
    # HELLO from sequence 0 after a restart, a card
    enc, dec, e = Encoder(), make_decoder("shoe-ascii/1"), engine()
    events: list[Event] = []
    for f in fault_then_restart():
        for frame in dec.feed(f.t, enc.encode(f)):
            events += e.feed(frame)
    events += e.feed(Link(T0 + 0.1, None, False, "gone"))
    events += e.feed(Link(T0 + 0.2, None, True, "back"))
    for f in (Hello(T0 + 0.3, 0, "FAKE", "1.0", "1"), Card(T0 + 0.4, 1, "TS")):
        for frame in dec.feed(f.t, enc.encode(f)):
            events += e.feed(frame)
    assert ("DEVICE_FAULT", "corrected") not in fault_codes(events)
    assert [c["card"] for c in events if c["type"] == "card"][-1] != "TS"  # held: the restart lost frames


# --- item 8: what a coup may hold ----------------------------------------------


def held_coup(e: Engine) -> list[Event]:
    """Coup 1's P2 unread and its RESULT: the Player's 9 plus the unread card
    may need a third card, so the RESULT and every later frame are held."""
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S"), Card(T0, 4, "9S"), Card(T0, 5, "KH")]
    frames += [Card(T0, 6, None), Card(T0, 7, "QH"), Button(T0, 8, "RESULT")]
    return [ev for f in frames for ev in e.feed(f)]


def later_frames(n: int) -> list[Frame]:
    """``n`` frames within the deadline: coups of four cards and a RESULT. A
    shoe's own cards cannot fill the bound (a 12-deck shoe's are 937 frames at
    most), so these are from a ninth deck: each coup is void (FOREIGN_CARD)."""
    out: list[Frame] = []
    for i in range(n):
        t = T0 + 0.5 + i * 1e-4
        out.append(Button(t, 9 + i, "RESULT") if i % 5 == 4 else Card(t, 9 + i, "9D", deck=9))
    return out


def test_a_coup_holds_up_to_the_bound_and_the_frame_past_it_voids_it() -> None:
    e = engine()
    held_coup(e)
    frames = later_frames(MAX_HELD)
    out = [ev for f in frames[:-1] for ev in e.feed(f)]
    assert out == []  # every frame held, nothing placed
    assert e.shoe is not None and e.shoe.current is not None and e.shoe.current.held is not None
    assert len(e.shoe.current.held) == MAX_HELD  # (its own RESULT and the later frames)
    out = e.feed(frames[-1])
    # void as at its deadline: its held cards up to the first held RESULT
    # (its own) would be its extra cards; what follows is dealt on, and
    # nothing is held any more
    (void,) = [v for v in out if v["type"] == "coup.void" and v["coup"] == 1]
    assert void["code"] == "UNREAD_CARD"
    assert next((m["code"], m["action"], m["detail"]) for m in out if m["type"] == "misdeal") == (
        "UNREAD_CARD",
        "void",
        f"not corrected before {MAX_HELD} frames were held behind it",
    )
    assert [c["card"] for c in void["cards"]] == ["9S", "KH", None, "QH"]
    assert e.shoe.current is not None and e.shoe.current.held is None
    # nothing settled; the coups after it keep their numbers, each void by its
    # foreign card; the last one is still being dealt
    whole = MAX_HELD // 5  # (1024 frames: 204 coups and four cards)
    later = [(v["coup"], v["code"]) for v in out if v["type"] == "coup.void" and v["coup"] != 1]
    assert later == [(n, "FOREIGN_CARD") for n in range(2, 2 + whole + 1)]
    assert [r for r in out if r["type"] == "coup.result"] == []
    assert e.shoe.current.number == 2 + whole and e.shoe.current.dealing
    # every card is accounted for, in its coup
    assert [c["coup"] for c in out if c["type"] == "card"] == [2 + i // 4 for i in range(MAX_HELD - whole)]


def test_a_void_coup_waiting_for_a_result_that_never_comes_loses_the_numbering_at_the_bound() -> None:
    # Coup 1 is void (a foreign card), then frames are lost: what follows is
    # held for the next RESULT to say whose it is. No RESULT comes; past the
    # bound the coup closes and, since the frames lost may hold coup ends, the
    # numbering of the coups after it is lost: nothing is settled.
    e = engine()
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S"), Card(T0, 4, "9S"), Card(T0, 5, "KH", deck=9)]
    frames.append(SequenceGap(T0, 9, 6, 3))
    for f in frames:
        e.feed(f)
    assert e.shoe is not None and e.shoe.current is not None and e.shoe.current.held == []
    cards = [Card(T0 + i * 1e-4, 9 + i, "AC") for i in range(MAX_HELD + 1)]
    out = [ev for f in cards[:-1] for ev in e.feed(f)]
    assert out == [] and len(e.shoe.current.held) == MAX_HELD
    out = e.feed(cards[-1])
    assert next((a["code"], a["coup"]) for a in out if a["type"] == "security.alert") == (
        "COUP_NUMBERING_LOST",
        1,
    )
    assert [r for r in out if r["type"] == "coup.result"] == []
    assert e.shoe.current is None or e.shoe.current.held is None
    assert sum(1 for c in out if c["type"] == "card") == MAX_HELD + 1


def test_a_coup_lists_at_most_a_shoe_of_extra_cards_and_counts_the_rest() -> None:
    # Coup 1's P2 unread, then cards from a ninth deck and no RESULT: all held,
    # then at the bound the coup is void and every held card is its extra card
    # (none of them the shoe's own). The coup.void lists a shoe's worth.
    e = engine()
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S"), Card(T0, 4, "9S"), Card(T0, 5, "KH")]
    frames += [Card(T0, 6, None), Card(T0, 7, "QH")]
    frames += [Card(T0 + i * 1e-4, 8 + i, "9D", deck=9) for i in range(MAX_HELD + 1)]
    out = [ev for f in frames for ev in e.feed(f)]
    (void,) = [v for v in out if v["type"] == "coup.void"]
    assert len(void["cards"]) == 4 + MAX_LISTED_EXTRAS
    unlisted = MAX_HELD + 1 - MAX_LISTED_EXTRAS
    assert void["detail"] == (
        f"not corrected before {MAX_HELD} frames were held behind it "
        f"({unlisted} more extra cards, shown by their card events, not listed)"
    )
    assert sum(1 for c in out if c["type"] == "card" and c["position"] == "extra") == MAX_HELD + 1


def test_a_supervisor_cannot_enter_more_copies_of_a_card_than_the_shoe_has_left() -> None:
    e = engine()
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S"), Card(T0, 4, "9S"), SequenceGap(T0, 200, 5, 195)]
    for f in frames:
        e.feed(f)
    for i in range(8):  # eight decks: eight copies of the 5C
        reply, _ = e.command({"id": i, "cmd": "enter_card", "coup": 1, "card": "5C"}, T0 + 1)
        assert reply["ok"] is True
    reply, _ = e.command({"id": 9, "cmd": "enter_card", "coup": 1, "card": "5C"}, T0 + 1)
    assert reply["error"] == "5C: every copy left in this shoe is entered already"


def test_an_unread_card_after_every_card_of_the_shoe_is_foreign() -> None:
    # One deck: the burn (2 cards) and a natural (4), voided, then unread
    # cards set aside as its extra cards; the 47th makes 53 cards out of a
    # 52-card shoe. (Unread cards were counted without end, so coups
    # awaiting their entry could pile up without end too.) (A live coup's
    # cards past its tableau with no RESULT would be the next coups'.)
    e = Engine("T01", load_profile("punto_banco"), 1)
    out = [ev for f in _natural_voided(e) for ev in e.feed(f)]
    assert [a for a in out if a["type"] == "security.alert"] == []
    assert e.shoe is not None and e.shoe.comp.cards_left == 0
    out = e.feed(Card(T0, 54, None))
    assert [(a["code"], a["detail"]) for a in out if a["type"] == "security.alert"] == [
        ("FOREIGN_CARD", "an unread card after every card of this 1-deck shoe was dealt")
    ]
    assert e.shoe.comp.cards_left == 0 and e.shoe.coups[1].extras == [None] * 47


def _natural_voided(e: Engine) -> list[Frame]:
    """A one-deck shoe's burn and a natural (6 cards), the natural voided by
    the supervisor; returns the 46 unread cards that follow, to be fed."""
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S")]
    frames += [Card(T0, 4 + i, c) for i, c in enumerate(["9S", "KH", "TS", "QH"])]  # a natural
    for f in frames:
        e.feed(f)
    reply, _ = e.command({"id": "v", "cmd": "void", "coup": 1, "reason": "test"}, T0)
    assert reply["ok"], reply
    return [Card(T0, 8 + i, None) for i in range(46)]


def test_a_read_card_after_every_card_of_the_shoe_was_dealt_is_foreign() -> None:
    # One deck, the burn, a natural voided, 46 unread extra cards: 52 out. A
    # 9C (of which no copy has been read) cannot come from this shoe any more.
    e = Engine("T01", load_profile("punto_banco"), 1)
    for f in _natural_voided(e):
        e.feed(f)
    out = e.feed(Card(T0, 54, "9C"))
    assert [(a["code"], a["detail"]) for a in out if a["type"] == "security.alert"] == [
        ("FOREIGN_CARD", "9C after every card of this 1-deck shoe was dealt")
    ]


def dealt_shoe(rng: random.Random, e: Engine) -> tuple[list[Frame], list[int]]:
    """A whole shoe as a table deals it (HELLO, NEWSHOE, the burn, coups by
    the tableau, each ended by RESULT) and, per frame, the number of the coup
    that RESULT ends (0: not a RESULT)."""
    cards = [r + s for r in "A23456789TJQK" for s in "SHDC"] * e.decks
    rng.shuffle(cards)
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    burn = 1 + e.profile.burn_count(RANK_BURN[cards[0][0]], e.decks)
    dealt, ends, coup = cards[:burn], [0, 0] + [0] * burn, 0
    cards = cards[burn:]
    while len(cards) >= 6:
        coup += 1
        trial = Coup(number=0, demo=False, t_start=0.0)
        while len(trial.cards) < 4 or (pos := tableau.next_position(e, trial)) is not None:
            trial.positions.append(ORDER[len(trial.cards)] if len(trial.cards) < 4 else pos)
            trial.cards.append(cards.pop(0))
        dealt += [*trial.cards, "RESULT"]
        ends += [0] * len(trial.cards) + [coup]
    for i, what in enumerate(dealt):
        t = T0 + 0.01 * (i + 2)
        frames.append(Button(t, i + 2, "RESULT") if what == "RESULT" else Card(t, i + 2, what))
    return frames, ends


#: per frame received: the device restarts before it (losing nothing here,
#: which the engine cannot know)
HELLO_P = 0.002


def test_the_true_next_coup_is_always_in_the_range_accept_allows() -> None:
    # Shoes dealt in full with runs of frames lost on the line (now and then
    # a device restart): wherever the numbering is lost, after each RESULT
    # received the true number of the next coup is one accept takes, and the
    # engine's own next number is not past it. 300 shoes, seeded (the same
    # check passed on 2,000 more shoes of other seeds while this was written).
    # (A tighter range, counted from the frames lost since the coup whose
    # number may be wrong, failed here: frames held and placed later are
    # counted where they arrived, so the losses are taken since the shoe
    # began, and cards held count as dealt.)
    rng = random.Random(11)
    checked = 0
    for _ in range(300):
        e = engine()
        frames, ends = dealt_shoe(rng, e)
        lose, i, seq_gap = rng.choice((0.01, 0.03, 0.08)), 0, 0
        while i < len(frames):
            f = frames[i]
            if i > 6 and rng.random() < lose:  # a run of frames lost
                n = rng.randint(1, 12)
                i += n
                seq_gap += n
                continue
            if seq_gap:
                e.feed(SequenceGap(f.t, f.seq, (f.seq or 0) - seq_gap, seq_gap))
                seq_gap = 0
            if i > 6 and rng.random() < HELLO_P:
                e.feed(Hello(f.t, 0, "FAKE", "1.0", "1"))
            e.feed(f)
            s = e.shoe
            if ends[i] and s is not None and s.numbering_lost is not None and not s.ended_emitted:
                high, _ = loss.renumber_range(e, s)
                assert s.next_coup <= ends[i] + 1 <= high, (ends[i] + 1, s.next_coup, high, _)
                checked += 1
            i += 1
    assert checked > 1000  # (the numbering was lost often enough to test)
