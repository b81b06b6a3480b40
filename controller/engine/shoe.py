"""The shoe procedure: start, burn, cut card, last coup, end.

Owns a shoe's life outside its coups: its id, ``shoe.started`` (with the
shuffler's commitment and order, ``on_commit``/``on_order``), the burn (the
first card decides how many), the cut card and the last permitted coup,
and its end (every open coup void, ``shoe.ended``).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from controller.cards import RANK_BURN, ShoeComposition
from controller.engine import analytics, article_x, boundary, dealing, loss, machine, settings, tableau
from controller.engine.loss import _frames_lost
from controller.engine.machine import BURN, DEALING_OVER
from controller.engine.state import AWAITING, BURN_HANDS, Shoe, Work, _Commit, _copy_stats, release
from controller.event_types import UNSET, ShoeBurn, ShoeCutCard, ShoeEnded, ShoeStarted, Tally
from controller.events import shoe_id_for
from firmware_protocols.frames import (
    Card,
    CutCard,
    Frame,
    Renumbered,
    ShuffleCommit,
    ShuffleOrder,
)

if TYPE_CHECKING:
    from controller.engine.facade import Engine


def start_shoe(eng: Engine, t: float) -> Shoe:
    # ids are never reused, even if the clock steps back (NTP, a capture
    # whose times go back): event ids are <table>/<shoe>/<seq>
    base = sid = shoe_id_for(t)
    n = 1
    while sid in eng._shoe_ids:
        n += 1
        sid = f"{base}.{n}"
    eng._shoe_ids.add(sid)
    settings.at_shoe_start(eng)  # a change of settings waiting for the next shoe
    shoe = Shoe(id=sid, t_start=t, comp=ShoeComposition(eng.decks), commit=None, order=None)
    shoe.loss_mark = (eng._lost_frames, eng._lost_unknown)
    eng.shoe = shoe
    eng._lost_after_shoe = 0
    return shoe


def start_shoe_unseen(eng: Engine, t: float) -> Shoe:
    """A card after frames were lost once a shoe had ended: the next
    shoe's NEWSHOE and burn may have been lost with them (or this is a
    card past the last coup). Either way nothing of it can be settled
    before a supervisor says where the shoe stands: it starts here, its
    burn unchecked and its numbering lost."""
    lost = eng._lost_after_shoe
    s = start_shoe(eng, t)
    # its first coups were among the frames lost since the shoe before ended
    s.window, s.loss_mark = (1, 0), eng._loss_at_end
    announce(eng, s)
    machine.set_phase(s, "NEWSHOE and burn lost")
    detail = f"{_frames_lost(lost)} after the last shoe ended: this shoe's NEWSHOE and burn may be among them"
    eng._alert(t, "BURN_MISMATCH", detail + "; its burn is not checked", None)
    s.numbering_lost = detail
    eng._alert(
        t,
        "COUP_NUMBERING_LOST",
        detail + ": every coup of this shoe is void until a supervisor sends accept with the number of "
        "the next coup to be dealt, or a new shoe starts",
        None,
    )
    return s


def announce(eng: Engine, s: Shoe) -> None:
    """``shoe.started``, stamped with the shoe's start, once its first
    card comes: a shuffler may send its commitment before or after the
    dealer's NEWSHOE, and the shoe takes whichever came by then."""
    if s.announced:
        return
    s.announced = True
    commit, eng._commit = eng._commit, None
    if commit is not None:
        s.commit = commit.sha256
        s.order = commit.order if commit.valid and commit.received >= commit.ncards else None
    news = settings.rules_news(eng)
    eng._emit(
        s.t_start,
        ShoeStarted(
            decks=eng.decks,
            profile=eng.profile.name,
            shuffle_commit=s.commit,
            rules=UNSET if news is None else news,
        ),
    )


def new_shoe(eng: Engine, t: float) -> Work:
    if eng.shoe is not None:
        yield from end_shoe(eng, t, reason="new shoe loaded")
    start_shoe(eng, t)


def end_shoe(eng: Engine, t: float, reason: str) -> Work:
    s = eng.shoe
    if s is None or s.ended_emitted or s.ending:
        return
    s.ending = True
    s.ended_by_rule = reason == "last coup dealt"
    announce(eng, s)
    # Void what is still open, lowest first. Frames a voided coup held
    # past its RESULT are dealt on (they were dealt before this shoe
    # ended), which may open, settle or leave open further coups: loop.
    unsure = False  # whether a coup was dealt is not known
    while True:
        if s.after_premature is not None:
            yield from boundary.flush_after_premature(eng, s)
        cur = s.current
        if cur is not None and cur.past:
            # cards past its complete tableau, no RESULT: its extra cards
            yield from boundary.past_as_extras(eng, s, cur)
        if cur is not None and cur.resolved and cur.held is not None:
            # a void coup still dealt, holding frames to tell whose they
            # are: with the shoe ending, its held cards are its extras,
            # unless the frames lost before them held its end (they are
            # then the next coup's: counted, void)
            held = machine.unhold(cur)
            cards = [x for x in held if isinstance(x, Card)]
            ends = loss.ends_in(eng, cur, held, result=False) if cur.lost_frames and cards else {0}
            if min(ends) >= 1 and not any(isinstance(x, Renumbered) for x in held):
                yield from boundary.close_dealing(eng, cur, t)
                yield from loss.void_phantom(eng, cards, t, min(ends) - 1)
                continue
            for x in cards:
                dealing.set_aside(eng, s, cur, x)
        if (
            cur is not None
            and not cur.resolved
            and cur.lost_frames
            and not cur.cards
            and not cur.extras
            and not any(isinstance(x, Card) for x in cur.held or [])
        ):
            # a coup opened by frames lost, nothing of it seen: they may
            # have been the coup before's last frames, or this one's
            # first; whether it was dealt is not known
            unsure = True
        if cur is not None and cur.resolved and cur.carry:
            # a card set aside to open the next coup: it opens it now
            carry, cur.carry = cur.carry, []
            machine.close(cur)
            s.current = None
            yield from release(carry)
            continue
        pending = sorted((c for c in s.coups.values() if not c.resolved), key=lambda c: c.number)
        if not pending:
            break
        coup = pending[0]
        detail = f"{reason} before coup {coup.number} was settled"
        yield from article_x.void_misdeal(eng, t, coup, "SHOE_ENDED", detail)
    s.coups.clear()
    s.current = None
    machine.set_phase(s, "shoe ends")
    eng._loss_at_end = (eng._lost_frames, eng._lost_unknown)
    eng._emit(
        t,
        ShoeEnded(
            coups=s.coups_count,
            # false: frames lost may have held whole coups, so ``coups``
            # counts those seen (the numbering was never given back)
            coups_exact=s.numbering_lost is None and not unsure,
            cards_dealt=s.comp.dealt,
            tally=Tally(player=s.tally["player"], banker=s.tally["banker"], tie=s.tally["tie"]),
            reason=reason,
            stats=_copy_stats(s.stats),
        ),
    )


def maybe_finish_shoe(eng: Engine, t: float) -> Work:
    s = eng.shoe
    if s is None or s.phase is not DEALING_OVER or s.ending:
        return
    if any(not c.resolved for c in s.coups.values() if not c.overrun):
        return
    yield from end_shoe(eng, t, reason="last coup dealt")
    # overrun coups after the end still belong to this shoe
    machine.set_phase(s, "shoe ends")


def burn_card(eng: Engine, s: Shoe, f: Card) -> Work:
    if f.hand is not None and f.hand not in BURN_HANDS:
        eng._alert(f.t, "BURN_MISMATCH", f"the device placed a card on {f.hand} during the burn", s.next_coup)
    dealing.take(eng, s, f, None)  # alerts only: the burn belongs to no coup
    dealing.card_event(eng, f, None, "burn")
    if s.burn_left is None:
        s.first_card = f.card
        if f.card is None:
            # the burn count is unknowable: hold coup 1 until a supervisor
            # enters the first card. A coup in play now was opened by
            # frames lost before this card and, its gap accepted, has no
            # card yet: it is the coup this burn comes before (as it is
            # when the first card is read), not one to leave open behind
            # a new one.
            coup = s.current
            if coup is None or not coup.dealing:
                coup = yield from dealing.open_coup(eng, s, f.t)
            if coup.resolved:
                # void already: it awaits no supervisor (a void coup's
                # cards are shown, never corrected: dealing.deal_void), so
                # nothing would end a hold. The burn ends here unchecked,
                # as when a coup holding it is voided (loss.discard_held),
                # and the void coup is dealt on until its boundary.
                detail = "the first (burn) card was unread in a void coup: burn count unknown"
                eng._alert(f.t, "BURN_MISMATCH", detail, coup.number)
                machine.set_phase(s, "frames lost during the burn")
                eng._emit(f.t, ShoeBurn(first_card=None, burned=s.burned))
                return
            machine.hold(coup, [])
            coup.had_unread = True
            article_x.misdeal(
                eng,
                f.t,
                coup,
                "UNREAD_CARD",
                "the first (burn) card was unread: burn count unknown",
                AWAITING,
            )
            machine.set_phase(s, "first card unread")
            return
        s.burn_left = eng.profile.burn_count(RANK_BURN[f.card[0]], eng.decks)
    else:
        s.burned += 1
        s.burn_left -= 1
        if f.card is not None:
            s.burned_cards.append(f.card)
    if s.burn_left == 0:
        finish_burn(eng, s, f.t)


def finish_burn(eng: Engine, s: Shoe, t: float) -> None:
    machine.set_phase(s, "burn complete")
    eng._emit(t, ShoeBurn(first_card=s.first_card, burned=s.burned))
    analytics.publish_odds(eng, t)


# The burn's end where the device labels each card's place (Angel Eye:
# ``burn``, ``P1``, ``B1``...): its labels decide where a card goes, and the
# burn count only raises BURN_MISMATCH (docs/dealing-errors.md, "Dealing errors"). A card it
# places on a hand ends the burn, however many were burned; a card it labels
# burn before coup 1 is a burn card, however many the first card called for.
# The other protocols (shoe-ascii/1, shoe-bin/1) label no card: there the
# first card's count decides where the burn ends.

#: the labels of a burn card (``first`` starts a new shoe: ``dealing.on_card``)
BURN_LABELS = frozenset(("burn", "burn_count"))


def burned_past_call(eng: Engine, s: Shoe) -> bool:
    """More cards were burned than the first card calls for (the device
    labelled them burn: ``before_coup_one``)."""
    if s.first_card is None:
        return False
    return s.burned > eng.profile.burn_count(RANK_BURN[s.first_card[0]], eng.decks)


def burn_ended_by_label(eng: Engine, s: Shoe, f: Card) -> bool:
    """A card the device places on a hand during the burn, once the first
    card is known: the burn ends before it (BURN_MISMATCH, with the count
    called and the count burned), and it is coup 1's."""
    if f.hand is None or f.hand in BURN_HANDS or s.burn_left is None:
        return False
    eng._alert(
        f.t,
        "BURN_MISMATCH",
        f"the first card ({s.first_card}) calls for {s.burned + s.burn_left} burn card(s); "
        f"{s.burned} burned, then the device placed a card on {f.hand}: the burn ends there",
        s.next_coup,
    )
    s.burn_left = 0
    finish_burn(eng, s, f.t)
    return True


def after_burn_unread(eng: Engine, s: Shoe, f: Frame) -> Work:
    """The frame after an unread card that waits to be placed
    (``Shoe.burn_unread``): a card the device places on a hand other than
    P1 says the unread card was coup 1's P1 (the burn one short: it ends
    before it, BURN_MISMATCH); a card labelled burn or placed on P1, or
    any other frame that can tell nothing of it, leaves it the last burn
    card, as called. Then ``f`` applies (docs/dealing-errors.md, "Dealing errors": where
    the device labels each card's place, its labels decide where the burn
    ends)."""
    unread = s.burn_unread
    assert unread is not None
    s.burn_unread = None
    hand = f.hand if isinstance(f, Card) else None
    if hand is not None and hand not in BURN_HANDS and hand != "P1" and s.phase is BURN and s.burn_left == 1:
        eng._alert(
            f.t,
            "BURN_MISMATCH",
            f"the first card ({s.first_card}) calls for {s.burned + 1} burn card(s); {s.burned} burned, "
            f"then an unread card, and the device placed the next on {hand}: the unread card is coup 1's "
            "P1 and the burn ends before it",
            s.next_coup,
        )
        s.burn_left = 0
        finish_burn(eng, s, unread.t)
    yield from release([unread, f])


def before_coup_one(eng: Engine, s: Shoe, f: Card) -> bool:
    """A card before the shoe's first coup, its burn over: True if the
    device labels it burn (it is burned: shown, counted, in no coup); else
    it opens coup 1, after BURN_MISMATCH if more cards were burned than the
    first card called for (once, with both counts)."""
    if f.hand in BURN_LABELS and s.first_card is not None:
        dealing.take(eng, s, f, None)  # alerts only: the burn belongs to no coup
        dealing.card_event(eng, f, None, "burn")
        s.burned += 1
        if f.card is not None:
            s.burned_cards.append(f.card)
        return True
    if burned_past_call(eng, s):
        assert s.first_card is not None
        called = eng.profile.burn_count(RANK_BURN[s.first_card[0]], eng.decks)
        eng._alert(
            f.t,
            "BURN_MISMATCH",
            f"the first card ({s.first_card}) calls for {called} burn card(s); {s.burned} burned: each card "
            "the device labelled burn is burned, and coup 1 starts at the first it placed on a hand",
            s.next_coup,
        )
    return False


def on_cut(eng: Engine, f: CutCard) -> None:
    s = eng.shoe
    if s is None or (s.ended_emitted and not s.ended_by_rule):
        eng._alert(f.t, "CUT_CARD_UNEXPECTED", "cut card with no shoe in play", None)
        return
    cur = s.current
    if cur is not None and cur.held is not None:
        cur.held.append(f)
        return
    if s.cut_coup is not None:
        eng._alert(f.t, "CUT_CARD_REPEATED", "a second cut card in the same shoe", None)
        return
    announce(eng, s)
    if cur is not None and cur.dealing and tableau.next_position(eng, cur) is not None:
        coup_no = cur.number
    elif (due_to := boundary.due_cards_to(eng, s)) is not None:
        # among the due cards of a coup voided by a RESULT before its
        # tableau was complete: it came out in that coup, so the one more
        # coup is counted from it, as the dealer counts it
        coup_no = due_to
    else:
        coup_no = s.next_coup
    s.cut_coup = coup_no
    s.last_coup = coup_no + (1 if eng.rules["after_cut"] == "one_more" else 0)
    if s.comp.cards_left < int(eng.rules["cut_card_min"]):
        eng._alert(
            f.t,
            "CUT_CARD_POSITION",
            f"cut card with {s.comp.cards_left} cards left; the rule is at least {eng.rules['cut_card_min']}",
            coup_no,
        )
    eng._emit(f.t, ShoeCutCard(coup=coup_no, last_coup=s.last_coup))


def on_commit(eng: Engine, f: ShuffleCommit) -> None:
    if not 1 <= f.ncards <= 12 * 52:
        eng._alert(f.t, "SHUFFLE_COMMIT_INVALID", f"shuffler announced {f.ncards} cards", None)
        return
    eng._commit = _Commit(f.shoe_id, f.ncards, f.sha256.lower(), [None] * f.ncards)


def on_order(eng: Engine, f: ShuffleOrder) -> None:
    c = eng._commit
    if c is not None and not c.valid:
        return  # already alerted: this commitment cannot be trusted
    if c is None or f.index < 0 or f.index + len(f.cards) > c.ncards:
        eng._alert(f.t, "SHUFFLE_ORDER_INVALID", "shuffler order outside its commitment", None)
        return
    for i, card in enumerate(f.cards):
        c.order[f.index + i] = card
    c.received += len(f.cards)
    if c.received >= c.ncards:
        text = ",".join(x or "XX" for x in c.order)
        if hashlib.sha256(text.encode("ascii")).hexdigest() != c.sha256:
            eng._alert(
                f.t, "SHUFFLE_COMMIT_MISMATCH", "the shuffler's order does not match its commitment", None
            )
            c.valid = False  # cannot be trusted for the card-by-card check
            c.order = []
