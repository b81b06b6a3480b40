"""Cards into coups: each card taken from the shoe's composition, checked
(foreign, shuffler order) and placed where the tableau puts it.

Owns ``on_card`` (the entry for every card), opening a coup (its number,
demo flag, an overrun past the last coup) and dealing into a live or void
coup; where the card leaves the coup (its end, an extra card) is
``boundary``'s to decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.cards import CARD_VALUE
from controller.engine import analytics, article_x, boundary, loss, machine, shoe, tableau
from controller.engine.machine import BURN, ENDED
from controller.engine.state import AWAITING, BURN_HANDS, UNKNOWN, Coup, Shoe, Steps, Work
from firmware_protocols.frames import Card

if TYPE_CHECKING:
    from controller.engine.facade import Engine


#: The most extra cards a coup lists in its ``coup.void``: every card a shoe
#: can hold (12 decks). Only foreign cards (none of the shoe's own, each
#: raising FOREIGN_CARD), held before the coup is void, can go past it; they
#: are still shown by their own ``card`` events and counted in the detail.
MAX_LISTED_EXTRAS = 12 * 52


def on_card(eng: Engine, f: Card) -> Work | None:
    """Every card, arriving or released: the work left to do, if any (a
    plain card dealt into its coup has none: the hot path makes no
    generator)."""
    s = eng.shoe
    if s is not None and s.burn_unread is not None:
        return shoe.after_burn_unread(eng, s, f)
    if s is not None and f.hand == "first" and s.phase != ENDED:
        # An Angel Eye marks a new shoe's first card itself (it has no
        # NEWSHOE button): the shoe in play has ended, whatever it still
        # waited for (a due card after an early RESULT, frames held
        # after a gap, its last coup)
        return _new_shoe_then_place(eng, f)
    return _place(eng, s, f)


def _new_shoe_then_place(eng: Engine, f: Card) -> Work:
    yield from shoe.new_shoe(eng, f.t)
    work = _place(eng, eng.shoe, f)
    if work is not None:
        yield from work


def _place(eng: Engine, s: Shoe | None, f: Card) -> Work | None:
    if s is not None and s.current is not None and s.current.held is not None:
        s.current.held.append(f)
        return None
    if not f.game:
        out_of_game_card(eng, f)
        return None
    if s is not None and s.after_premature is not None:
        s.after_premature.append(f)
        # (after a void coup's early RESULT, the next RESULT decides: it
        # comes after at most its due cards and a whole coup of 6, 8 cards
        # once it has 4, 12 less its cards before)
        void = s.after_premature_void
        bound = 4 if void is None else 8 if len(void.cards) >= 4 else 13 - len(void.cards)
        if sum(isinstance(x, Card) for x in s.after_premature) >= bound:
            return boundary.flush_after_premature(eng, s)
        return None
    if s is not None and s.phase == ENDED and eng._lost_after_shoe and f.hand != "first":
        s = shoe.start_shoe_unseen(eng, f.t)
    elif s is None or (s.phase == ENDED and (f.hand == "first" or not s.ended_by_rule)):
        # A shoe with no NEWSHOE button starts at its first card (Angel
        # Eye marks that card itself). A shoe that ended by its cut card
        # does not: a card after its last coup is CUT_CARD_OVERRUN.
        s = shoe.start_shoe(eng, f.t)
    shoe.announce(eng, s)
    if s.phase == BURN and not shoe.burn_ended_by_label(eng, s, f):
        return shoe.burn_card(eng, s, f)
    coup = s.current
    if coup is None or not coup.dealing:
        if s.coups_count == 0 and shoe.before_coup_one(eng, s, f):
            return None
        return _open_then_deal(eng, s, f)
    return deal(eng, s, coup, f)


def _open_then_deal(eng: Engine, s: Shoe, f: Card) -> Work:
    coup = yield from open_coup(eng, s, f.t)
    work = deal(eng, s, coup, f)
    if work is not None:
        yield from work


def take(eng: Engine, s: Shoe, f: Card, coup: Coup | None) -> tuple[str, str] | None:
    """Remove the card from the composition. Returns ``(code, detail)``
    for a card this shoe cannot hold (FOREIGN_CARD) or one that departs
    from the shuffler's order (SHUFFLE_MISMATCH), after alerting; the
    caller decides what it does to the coup."""
    index = s.comp.dealt
    where = coup.number if coup is not None else None
    foreign_deck = f.deck is not None and not 1 <= f.deck <= eng.decks
    empty = s.comp.cards_left <= 0
    # a foreign-deck card left the shoe but is none of the shoe's own copies
    ok = True if foreign_deck else s.comp.take(f.card)
    if not ok or foreign_deck:
        if foreign_deck:
            what = f"{f.card} from deck {f.deck}, not in this {eng.decks}-deck shoe"
        elif empty:
            what = f"{f.card or 'an unread card'} after every card of this {eng.decks}-deck shoe"
            what += " was dealt"
        else:
            what = f"{f.card}: more copies than {eng.decks} deck(s) hold"
        eng._alert(f.t, "FOREIGN_CARD", what, where)
        return "FOREIGN_CARD", what
    if s.order and f.card is not None and index < len(s.order) and s.order[index] != f.card:
        detail = f"card {index + 1} of the shoe differs from the shuffler's order"
        eng._alert(f.t, "SHUFFLE_MISMATCH", detail, where)
        return "SHUFFLE_MISMATCH", detail
    return None


def card_event(eng: Engine, f: Card, coup: int | None, position: str) -> None:
    eng._emit_card(f.t, coup, position, f.card, CARD_VALUE[f.card] if f.card is not None else None, f.face_up)


def out_of_game_card(eng: Engine, f: Card) -> None:
    s = eng.shoe
    coup = s.current.number if s is not None and s.current is not None else None
    if s is not None:
        s.comp.take(f.card)
    card_event(eng, f, coup, "extra")
    eng._alert(f.t, "CARD_OUT_OF_GAME", "the device reports a card drawn while locked or in error", coup)


def open_coup(eng: Engine, s: Shoe, t: float) -> Steps[Coup]:
    if s.renumber_to is not None:
        target, s.renumber_to = s.renumber_to, None
        high, why = loss.renumber_range(eng, s)
        if target > high:
            # only a checkpoint written before the range was checked can
            # hold one: refused as the command would be now
            s.numbering_lost = f"the supervisor's number {target} is out of range ({why})"
            eng._alert(
                t,
                "COMMAND_REJECTED",
                f"accept {target}: the next coup is {s.next_coup} to {high} ({why}); "
                "the numbering stays lost",
                None,
            )
        elif s.next_coup < target:
            if (
                s.cut_coup is not None
                and s.last_coup is not None
                and s.window is not None
                and s.window[0] < s.cut_coup < s.next_coup <= s.last_coup
            ):
                # The cut card came out in a coup whose number was unknown
                # (opened after the loss): the supervisor's number places
                # it. The coups counted lost whole came before it, the coup
                # after it is still one more (docs/dealing-errors.md, "Coup numbers after
                # a gap"). (One that came between coups counts from the
                # engine's next number, as before the accept.)
                shift = target - s.next_coup
                s.cut_coup += shift
                s.last_coup += shift
            # each is void with no card; the odds are those of the coup
            # after the last of them, published once
            eng._odds_quiet = True
            try:
                while s.next_coup < target:
                    yield from void_lost_whole(eng, s, t)
            finally:
                eng._odds_quiet = False
            analytics.publish_odds(eng, t)
    n = s.next_coup
    s.next_coup += 1
    if s.last_coup is None or n <= s.last_coup:
        # (a coup past the last permitted is none of the shoe's coups:
        # shoe.ended, sent when the last is dealt, never counts it, nor
        # when frames held until the shoe ends open it first)
        s.coups_count += 1
    coup = Coup(number=n, demo=n <= int(eng.rules["demo_coups"]), t_start=t)
    machine.move(coup, machine.DEALING)
    coup.dealt_at_open = s.comp.dealt
    s.coups[n] = coup
    s.current = coup
    if s.last_coup is not None and n > s.last_coup:
        coup.overrun = True
        detail = f"coup {n} started after the last permitted coup {s.last_coup}"
        yield from article_x.void_misdeal(eng, t, coup, "CUT_CARD_OVERRUN", detail)
    elif s.numbering_lost is not None:
        detail = f"this coup's number is unknown: {s.numbering_lost}"
        yield from article_x.void_misdeal(eng, t, coup, "SEQUENCE_GAP", detail)
    return coup


def void_lost_whole(eng: Engine, s: Shoe, t: float) -> Work:
    """A coup the supervisor's numbering says was dealt while its frames
    were lost: counted, and void (nothing of it was read)."""
    n = s.next_coup
    s.next_coup += 1
    if s.last_coup is None or n <= s.last_coup:
        # (a coup past the last permitted is none of the shoe's coups:
        # shoe.ended, sent when the last is dealt, never counts it, nor
        # when frames held until the shoe ends open it first)
        s.coups_count += 1
    coup = Coup(number=n, demo=n <= int(eng.rules["demo_coups"]), t_start=t)
    machine.move(coup, machine.CLOSED)  # (it was dealt, its frames lost)
    s.coups[n] = coup
    detail = "lost whole on the line; counted by the supervisor's numbering"
    yield from article_x.void_misdeal(eng, t, coup, "SEQUENCE_GAP", detail)


def set_aside(eng: Engine, s: Shoe, coup: Coup, f: Card) -> tuple[str, str] | None:
    """A card that left the shoe in ``coup`` with no position: taken from
    the composition and shown as the coup's ``extra`` card."""
    problem = take(eng, s, f, coup)
    if len(coup.extras) < MAX_LISTED_EXTRAS:
        coup.extras.append(f.card)
    else:
        coup.extras_unlisted += 1
    card_event(eng, f, coup.number, "extra")
    return problem


def deal_void(eng: Engine, s: Shoe, coup: Coup, f: Card) -> None:
    """A card of a void coup: shown where the tableau puts it, or as an
    extra card once it is complete (or an unread card decides it)."""
    pos = tableau.next_position(eng, coup)
    if pos is None or pos == UNKNOWN:
        set_aside(eng, s, coup, f)
        return
    take(eng, s, f, coup)
    coup.positions.append(pos)
    coup.cards.append(f.card)
    card_event(eng, f, coup.number, pos)


def deal(eng: Engine, s: Shoe, coup: Coup, f: Card) -> Work | None:
    """A card into a coup still dealing: the work left to do, if any."""
    if f.hand in BURN_HANDS:
        eng._alert(
            f.t, "BURN_MISMATCH", f"the device reports {f.hand} during coup {coup.number}", coup.number
        )
    if coup.void_code is not None:
        # a void coup keeps its cards until its boundary, none settled
        placed = len(coup.cards)
        deal_void(eng, s, coup, f)
        if len(coup.cards) > placed:
            return boundary.after_void_card(eng, coup, f)
        return None
    pos = tableau.next_position(eng, coup)
    if pos == UNKNOWN:
        machine.hold(coup, [f])
        return None
    if pos is None:
        return boundary.past_tableau(eng, s, coup, f)
    if f.hand == "P1" and len(coup.cards) >= 2 and s.numbering_lost is None:
        return loss.unseen_loss(eng, f)
    problem = take(eng, s, f, coup)
    coup.positions.append(pos)
    coup.cards.append(f.card)
    card_event(eng, f, coup.number, pos)
    if problem is not None:
        return boundary.void_for_card(eng, coup, f, problem)
    if f.card is None:
        coup.had_unread = True
        article_x.misdeal(eng, f.t, coup, "UNREAD_CARD", f"{pos} passed the reader unread", AWAITING)
    if f.hand is not None and f.hand != pos and f.hand not in BURN_HANDS:
        article_x.misdeal(
            eng,
            f.t,
            coup,
            "WRONG_HAND",
            f"the device placed the card on {f.hand}; the tableau's next position is {pos}",
            AWAITING,
        )
    return boundary.after_card(eng, s, coup, f)
