"""Coup boundaries: where a coup ends, decided here, and its settlement.

Owns every way a coup ends: the dealer's buttons (RESULT, REDEAL, NEWSHOE)
and the device's own result; the automatic boundary (a complete tableau,
``after_card``, ``after_void_card``); a RESULT pressed early (premature),
the due card that corrects it and the cards after it; extra cards after a
complete tableau (the profile's ``extra_card``); a card the shoe cannot
hold (``void_for_card``). Then closing a coup's dealing (``close_dealing``)
and settling it by the profile's bet table (``coup.result``, ``roads``).
Loss recovery (``loss``) also closes coups, where the frames lost may have
held their end.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from controller.cards import CARD_VALUE
from controller.engine import analytics, article_x, dealing, loss, machine, shoe, tableau
from controller.engine.machine import BURN
from controller.engine.state import AWAITING, BURN_HANDS, UNKNOWN, Coup, Shoe, Work, release
from controller.events import net
from controller.rules import outcome_of, tags_of
from firmware_protocols.frames import (
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    DeviceSeen,
    Frame,
    Hello,
    HostRequest,
    Link,
    Renumbered,
    SequenceGap,
    Status,
)

if TYPE_CHECKING:
    from controller.engine.facade import Engine


def after_void_early_result(
    eng: Engine, s: Shoe, void: Coup, waiting: list[Card | Renumbered], f: Button | DeviceResult
) -> Work:
    """The RESULT after a void coup's early one: the cards between were
    its due cards (this is the dealer's second RESULT), or the next
    coup's (the first RESULT ended the void coup), or its due cards and
    then the next coup's. The tableau tells which, when only one fits.
    A supervisor's number that came among them applies where it came
    (``loss.number_after_due``)."""
    cards = [x for x in waiting if isinstance(x, Card)]
    short = len(void.cards) < 4
    trial = Coup(number=0, demo=False, t_start=0.0, positions=list(void.positions), cards=list(void.cards))
    due = 0
    for c in cards:
        pos = tableau.next_position(eng, trial)
        if pos is None or pos == UNKNOWN:
            break
        trial.positions.append(pos)
        trial.cards.append(c.card)
        due += 1
    codes = [c.card for c in cards]
    next_only = tableau.tableau_exact(eng, codes)  # the first RESULT ended the void coup
    after_due = 0 < due < len(cards) and tableau.tableau_exact(eng, codes[due:])
    placed = [i for i, c in enumerate(cards) if c.hand is not None and c.hand not in BURN_HANDS]
    if placed:
        # The device places each card itself (Angel Eye): its labels tell
        # whose the cards are. Those before the first it places on P1 (or
        # an unread card before one it places on B1) are the void coup's
        # (due cards, then extras), the rest the next coup's.
        due = next((i for i in range(len(cards)) if loss.opens_coup(cards, i)), len(cards))
        next_only, after_due = False, True
    elif short:
        # Its RESULT came before its first four cards, which no coup ends
        # with: the dealer deals its missing cards and presses RESULT
        # again (docs/dealing-errors.md, "Dealing errors": fewer than four cards before
        # the next RESULT are the voided coup's due cards). The cards are
        # read with the fewest dealing errors, and where two readings
        # tie, the one that settles nothing:
        # - all of them its due cards (the missing ones exactly, or fewer):
        #   its own, even if they would also make a whole coup by
        #   themselves (that reading would settle a coup on a guess);
        # - its due cards, then fewer than four past its complete tableau:
        #   its extra cards, unless all of them make one whole coup (the
        #   dealer began a new coup instead: ``hold_result_before_four_cards``);
        # - its due cards, then four or more: the next coup (the dealer
        #   did not press RESULT again), settled if exactly one whole coup
        #   and nothing else fits, void otherwise (below).
        if due == len(cards) or (len(cards) - due < 4 and not next_only):
            next_only, after_due, due = False, True, len(cards)
        elif next_only and not after_due:
            due = 0
    elif not next_only and not after_due and len(cards) < 4:
        after_due, due = False, len(cards)  # its due cards (and extras), then the second RESULT
    elif not after_due:
        due = 0
    for c in cards[:due]:
        if void.extras and not void.cards:
            # (a coup whose cards read could not be placed, its first frames
            # lost with the coup before's RESULT: nor can its due cards be)
            dealing.set_aside(eng, s, void, c)
        else:
            dealing.deal_void(eng, s, void, c)
    rest = loss.number_after_due(eng, s, void, waiting, due, closed=True)
    if not any(isinstance(x, Card) for x in rest):
        yield from release(rest)  # the dealer's second RESULT (a number: after it)
        return
    yield from release(rest)
    coup = s.current
    if coup is not None and not coup.resolved and next_only == after_due:
        when = "before its fourth card" if short else "with a card due"
        detail = (
            f"coup {void.number} had its RESULT {when}: whether the cards after it were its due "
            "cards or this coup's cannot be told from them"
        )
        yield from article_x.void_misdeal(eng, f.t, coup, "PREMATURE_RESULT", detail)
    # (the device's own result is compared with the coup it closes: SHOE_DISAGREES)
    yield from on_device_result(eng, f) if isinstance(f, DeviceResult) else result(eng, f)


#: frames that say frames may have been lost on the line
_LOSS = (SequenceGap, Hello, Link)


def due_cards_to(eng: Engine, s: Shoe) -> int | None:
    """The number of the void coup whose due cards are being dealt now,
    after its RESULT came with its tableau incomplete: the cards waiting
    for the next RESULT (``after_premature``) do not yet complete it, and
    (Angel Eye) none of them is placed on P1, which opens the next coup.
    None when no such coup waits."""
    void = s.after_premature_void
    if s.after_premature is None or void is None:
        return None
    waiting = [c for c in s.after_premature if isinstance(c, Card)]
    if any(loss.opens_coup(waiting, i) for i in range(len(waiting))):
        return None
    trial = Coup(number=0, demo=False, t_start=0.0, positions=list(void.positions), cards=list(void.cards))
    for c in waiting:
        pos = tableau.next_position(eng, trial)
        if pos is None or pos == UNKNOWN:
            break
        trial.positions.append(pos)
        trial.cards.append(c.card)
    return void.number if tableau.next_position(eng, trial) is not None else None


def flush_after_premature(eng: Engine, s: Shoe, frame: Frame | None = None) -> Work:
    """The cards after an early-RESULT coup were the next coup's: a frame
    other than a card or a RESULT came (``frame``), or more cards than a
    second RESULT could follow, or the shoe ends (no ``frame``).

    After a RESULT before a void coup's fourth card, only a loss on the
    line ends the wait for the next RESULT (a status, a cut card, a
    standby between the presses change nothing of whose the cards are):
    the cards its tableau takes are then its own, and the rest the next
    coup's."""
    void = s.after_premature_void
    if void is not None and len(void.cards) < 4 and frame is not None and not isinstance(frame, _LOSS):
        return
    waiting: list[Frame] = list(s.after_premature or [])
    s.after_premature = None
    s.after_premature_void = None
    if void is not None and len(void.cards) < 4:
        # (an Angel Eye's labels say whose they are: from the first card it
        # places on P1, the next coup's, as ``after_void_early_result``)
        due = 0
        read = [x for x in waiting if isinstance(x, Card)]
        for x in waiting:
            if not isinstance(x, Card):
                continue
            # (``x`` is ``read[due]``: each card before it was dealt into the void coup)
            if loss.opens_coup(read, due) or tableau.next_position(eng, void) in (None, UNKNOWN):
                break
            dealing.deal_void(eng, s, void, x)
            due += 1
        # (a supervisor's number among them: where it came, ``loss.number_after_due``)
        waiting = loss.number_after_due(eng, s, void, waiting, due, closed=False)
        void = None  # (the rest are past its complete tableau: no due card among them)
    yield from release(waiting)
    cards = [x for x in waiting if isinstance(x, Card)]
    coup = s.current
    if void is not None and coup is not None and cards and coup.number == void.number + 1:
        # no second RESULT: the first of these cards may have been the
        # void coup's due card, so this coup's hands are not known
        detail = (
            f"coup {void.number} had its RESULT with a card due and no second RESULT followed: "
            "this coup's first card may be its due card"
        )
        yield from article_x.void_misdeal(eng, cards[0].t, coup, "PREMATURE_RESULT", detail)


def on_button(eng: Engine, f: Button) -> Work:
    if f.name == "NEWSHOE":
        yield from shoe.new_shoe(eng, f.t)
    elif f.name == "RESULT":
        yield from result(eng, f)
    elif f.name == "REDEAL":
        s = eng.shoe
        if s is not None and s.current is not None and s.current.dealing and not s.current.resolved:
            coup = s.current
            yield from article_x.void_misdeal(eng, f.t, coup, "REDEAL", "the device announced a re-deal")
            yield from close_dealing(eng, coup, f.t)


def result(eng: Engine, f: Button | DeviceResult) -> Work:
    s = eng.shoe
    if s is not None and s.after_premature is not None:
        # the dealer's second RESULT: what came between were extra cards
        # of the coup already settled (burned, as the profile's policy
        # cannot apply to a settled coup)
        waiting, s.after_premature = s.after_premature, None
        prev = s.after_premature_coup
        void, s.after_premature_void = s.after_premature_void, None
        extras = [x for x in waiting if isinstance(x, Card)]
        # a supervisor's number given while they waited applies after them
        # and this RESULT: they were dealt before it
        numbers = [x for x in waiting if not isinstance(x, Card)]
        if void is not None:
            # (there, where it came among them: ``loss.number_after_due``)
            yield from after_void_early_result(eng, s, void, waiting, f)
            return
        yield from release(numbers)
        for c in extras:
            # the coup stands settled: no misdeal on it, but the card is
            # shown and surveillance is told (a foreign one alerts in _take)
            if dealing.take(eng, s, c, None) is None:
                eng._alert(
                    c.t,
                    "EXTRA_CARD",
                    f"a card ({c.card or 'unread'}) after the due card of coup {prev}, "
                    "before the dealer's second RESULT; burned",
                    prev,
                )
            dealing.card_event(eng, c, prev, "extra")
        return
    coup = s.current if s is not None else None
    fits = coup is not None and _early_fits(eng, s, coup)
    if s is not None and coup is not None and coup.past:
        # the RESULT came before a fourth card after the complete tableau:
        # the cards between were its extra cards, placed now (or the next
        # coup's first, its RESULT pressed early, with this coup's RESULT
        # never pressed: kept to tell at the next RESULT, ``_early_fits``)
        read = [c.card for c in coup.past if isinstance(c, Card)]
        yield from past_as_extras(eng, s, coup)
        if not fits and coup.void_code is None:
            # (a coup void, or read as beginning with the extra cards before
            # it, is not read as ending without its RESULT too: a third error)
            s.past_read = (coup.number, read)
    if s is not None and s.phase == BURN and coup is None:
        eng._alert(f.t, "BURN_MISMATCH", "RESULT pressed before the burn was complete", s.next_coup)
    if s is None or coup is None or not coup.dealing:
        return
    if not eng.button:
        return
    if coup.held is not None:
        if (coup.void_code is not None or (coup.anchor_prev is not None and coup.ends is None)) and not any(
            isinstance(x, (Button, DeviceResult)) for x in coup.held
        ):
            yield from loss.ends_at_result(eng, coup, f)
            return
        # Held too: it is the boundary only if it was not pressed early,
        # which the missing card will tell.
        coup.held.append(f)
        return
    if coup.void_code is not None:
        nxt = tableau.next_position(eng, coup)
        yield from close_dealing(eng, coup, f.t)
        if (
            nxt is not None
            and nxt != UNKNOWN
            and (len(coup.cards) >= 4 or loss.unnumbered(coup) or isinstance(f, DeviceResult))
            and not (isinstance(f, DeviceResult) and f.winner == "quit")
        ):
            # Pressed early, or the dealer stopped dealing the void coup:
            # a second RESULT before a fourth card says the cards between
            # were its due cards (counted as a coup of their own they
            # would shift every later number); a fourth card, the next coup.
            # A coup void before its first four cards (a supervisor's void,
            # a misdeal void at once) was abandoned there: the dealer clears
            # it with this RESULT and the next cards are the next coup's.
            # (A RESULT that itself comes before the fourth card of a live
            # coup is the early press below, whose due cards do follow; so
            # is one in a coup void only for its unknown number, which the
            # dealer deals as any other: ``loss.unnumbered``.) A device that
            # places each card itself (an Angel Eye, whose RESULT is its own
            # result) tells whether it was abandoned: the cards before the
            # first it places on P1 are still its own (``after_void_early_result``).
            await_due_cards(s, coup)
        return
    nxt = tableau.next_position(eng, coup)
    if nxt is None:
        if fits:
            detail = (
                f"the card(s) read as coup {coup.number - 1}'s extra cards and this coup's make one coup "
                f"with its RESULT pressed after them: coup {coup.number - 1}'s RESULT may not have been "
                "pressed, so this coup's hands are not known"
            )
            yield from article_x.void_misdeal(eng, f.t, coup, "PREMATURE_RESULT", detail)
        yield from close_dealing(eng, coup, f.t)
    elif nxt == UNKNOWN:
        if tableau.complete_whatever_unread(eng, coup):
            # every value the unread card(s) could have completes the
            # tableau: this RESULT is the boundary for certain
            yield from close_dealing(eng, coup, f.t)
        else:
            # It may have been pressed early: only the missing card can
            # tell where this coup ends, so nothing after it is placed
            # until a supervisor enters it (or the deadline voids it).
            machine.hold(coup, [f])
    elif len(coup.cards) < 4:
        # A RESULT before the first four cards: no third card was due, so
        # this is no early press the next cards could correct. The
        # coup's boundary cannot be trusted: never settle it. Nor is it
        # the coup's end: the dealer deals its missing cards and presses
        # RESULT again, and those cards are its due cards (counted as a
        # coup of their own they would shift every later number by one):
        # the next RESULT tells (``after_void_early_result``).
        detail = f"RESULT after only {len(coup.cards)} card(s) of the coup"
        yield from article_x.void_misdeal(eng, f.t, coup, "PREMATURE_RESULT", detail)
        yield from close_dealing(eng, coup, f.t)
        await_due_cards(s, coup)
    elif not coup.premature:
        article_x.misdeal(
            eng, f.t, coup, "PREMATURE_RESULT", f"RESULT pressed with {nxt} still due", AWAITING
        )


def _early_fits(eng: Engine, s: Shoe | None, coup: Coup) -> bool:
    """Whether ``coup``, complete at its RESULT with extra cards of its own
    (placed or waiting), may as well be another coup: the cards the RESULT
    before it placed as its predecessor's extra cards (fewer than four,
    ``Shoe.past_read``) were its first, that RESULT pressed early, and its
    cards and extras then exactly its due cards. Two dealing errors each
    way (two coups with extra cards; a RESULT never pressed and one
    pressed early): both readings fit, so it is not settled on a guess
    (docs/dealing-errors.md, "Dealing errors": the engine never guesses a coup's
    boundary). The number is the same either way. Without extra cards of
    its own the first reading has one error, and is taken."""
    if s is None or s.past_read is None:
        return False
    number, read = s.past_read
    s.past_read = None
    if number != coup.number - 1 or coup.void_code is not None or coup.held is not None:
        return False
    own = [*coup.extras, *(c.card for c in coup.past if isinstance(c, Card))]
    if not own:
        return False  # (one dealing error, the extra card, against two: read so)
    return tableau.tableau_exact(eng, [*read, *coup.cards, *own])


def await_due_cards(s: Shoe, coup: Coup) -> None:
    """A void coup closed by a RESULT with its tableau incomplete: the
    cards up to the next RESULT are held to tell whether they are its due
    cards (``after_void_early_result``), unless nothing can be told: frames
    were lost in it (its tableau is not known), its shoe has ended, or
    cards already wait. A shoe whose numbering is lost waits too: its
    coups are still counted (``accept`` takes no number below the
    engine's own next), so due cards counted as a coup of their own
    would make the true number of the next coup a refused one. So does
    a shoe ending while frames held are dealt on (they were dealt before
    it ended; ``shoe.end_shoe`` places what still waits)."""
    if s.after_premature is None and not coup.lost_frames and not s.ended_emitted:
        s.after_premature = []
        s.after_premature_coup = coup.number
        s.after_premature_void = coup


def close_dealing(eng: Engine, coup: Coup, t: float) -> Work:
    s = eng.shoe
    assert s is not None
    machine.close(coup)
    if s.current is coup:
        s.current = None
    machine.coup_closed(s, coup.number)
    if coup.void_code is None and not coup.open and coup.held is None:
        yield from settle(eng, coup, t)
    elif coup.void_code is not None:
        analytics.publish_odds(eng, t)
    if coup.resolved:
        s.coups.pop(coup.number, None)
    yield from shoe.maybe_finish_shoe(eng, t)
    if coup.carry:
        carry, coup.carry = coup.carry, []
        yield from release(carry)


#: What settling needs of a coup's outcome, computed once per outcome: the
#: outcome (``rules.outcome_of``), its tags and the profile's settlement
#: (each bet's net as JSON writes it). Keyed by the facts it depends on.
Settled: TypeAlias = tuple[dict[str, Any], tuple[str, ...], dict[str, int | float]]


def _settled(eng: Engine, pv: list[int], bv: list[int], ppair: bool, bpair: bool, natural: bool) -> Settled:
    """The outcome of a coup with these hands' values, pairs and natural,
    from the engine's cache. An outcome is a function of the hands' totals
    and sizes, the pairs and the natural: at most 9,600 keys, most of them
    impossible, and a shoe repeats most of the rest."""
    key = (sum(pv) % 10, sum(bv) % 10, len(pv), len(bv), ppair, bpair, natural)
    got = eng._outcomes.get(key)
    if got is None:
        outcome = outcome_of(pv, bv, ppair, bpair, natural)
        settlement = {k: net(v) for k, v in eng.profile.settle(outcome).items()}
        got = (outcome, tuple(tags_of(outcome)), settlement)
        eng._outcomes[key] = got
    return got


def _hands(coup: Coup) -> tuple[list[str], list[str]] | None:
    """The Player's and the Banker's cards of a coup, None while one is unread."""
    player: list[str] = []
    banker: list[str] = []
    for p, c in zip(coup.positions, coup.cards, strict=True):
        if c is None:
            return None
        if p[0] == "P":
            player.append(c)
        elif p[0] == "B":
            banker.append(c)
    return player, banker


def _scored(eng: Engine, player: list[str], banker: list[str]) -> tuple[bool, bool, bool, Settled]:
    """The pairs, the natural and the outcome of two hands of two cards or more."""
    pv = [CARD_VALUE[c] for c in player]
    bv = [CARD_VALUE[c] for c in banker]
    ppair = player[0][0] == player[1][0]
    bpair = banker[0][0] == banker[1][0]
    natural = eng.tab.natural[(pv[0] + pv[1]) % 10] or eng.tab.natural[(bv[0] + bv[1]) % 10]
    return ppair, bpair, natural, _settled(eng, pv, bv, ppair, bpair, natural)


def result_ahead(eng: Engine, coup: Coup) -> tuple[str, bool, bool] | None:
    """What ``settle_now`` would add to the shoe's ``results`` for this coup
    (winner, Player pair, Banker pair), were it to settle now; None if its
    hands are not dealt yet. For work done ahead (``analytics.prepare``),
    which checks its guess when the coup does settle: no state changes."""
    hands = _hands(coup)
    if hands is None or len(hands[0]) < 2 or len(hands[1]) < 2:
        return None
    ppair, bpair, _, (outcome, _, _) = _scored(eng, *hands)
    return outcome["winner"], ppair, bpair


def settle(eng: Engine, coup: Coup, t: float) -> Work:
    work = settle_now(eng, coup, t)
    if work is not None:
        yield from work


def settle_now(eng: Engine, coup: Coup, t: float) -> Work | None:
    """Settles the coup now, by the profile's bet table; what is left to do
    if the device's own result disagrees and a card was unread (its void)."""
    s = eng.shoe
    assert s is not None
    hands = _hands(coup)
    if hands is None:  # pragma: no cover - guarded by open misdeals
        return None
    player, banker = hands
    ppair, bpair, natural, (outcome, tags, settlement) = _scored(eng, player, banker)
    dr = coup.device_result
    if dr is not None and (
        dr.winner != outcome["winner"] or dr.player_pair != ppair or dr.banker_pair != bpair
    ):
        detail = (
            f"the device announced {dr.winner} (pairs P={dr.player_pair} B={dr.banker_pair}); "
            f"the tableau gives {outcome['winner']} (pairs P={ppair} B={bpair})"
        )
        eng._alert(t, "SHOE_DISAGREES", detail, coup.number)
        if coup.had_unread:
            article_x.misdeal(eng, t, coup, "SHOE_DISAGREES", detail + "; a card was unread", "void")
            return article_x.void(eng, t, coup, "SHOE_DISAGREES", detail)
        article_x.misdeal(
            eng, t, coup, "SHOE_DISAGREES", detail + "; every card was read: the tableau stands", "corrected"
        )
        if "SHOE_DISAGREES" not in coup.corrections:
            coup.corrections.append("SHOE_DISAGREES")
    machine.move(coup, machine.SETTLED)
    winner = outcome["winner"]
    if not coup.demo:
        s.tally[winner] += 1
        st = s.stats
        st["naturals"] += natural
        st["player_pairs"] += ppair
        st["banker_pairs"] += bpair
        if tags:
            counts = st["tags"]
            for tag in tags:
                counts[tag] = counts.get(tag, 0) + 1
        s.results.append({"winner": winner, "player_pair": ppair, "banker_pair": bpair})
    # (a CoupResult, its dict built at once: see Engine._emit_fields)
    eng._emit_fields(
        t,
        "coup.result",
        {
            "coup": coup.number,
            "demo": coup.demo,
            "player": {"cards": player, "total": outcome["player_total"]},
            "banker": {"cards": banker, "total": outcome["banker_total"]},
            "winner": winner,
            "natural": natural,
            "player_pair": ppair,
            "banker_pair": bpair,
            "tags": list(tags),
            "settlement": None if coup.demo else dict(settlement),
            "corrections": list(coup.corrections),
        },
    )
    if not coup.demo:
        # (for a supervisor's correction: ``engine.correction``)
        s.settled_coups[coup.number] = (player, banker, f"{eng.table}/{s.id}/{eng.seq}", len(s.results) - 1)
        if eng.roads:
            eng._later(functools.partial(analytics.emit_roads, eng, t, s.results, len(s.results)))
    analytics.publish_odds(eng, t)
    return None


def on_device_result(eng: Engine, f: DeviceResult) -> Work:
    s = eng.shoe
    coup = s.current if s is not None else None
    if coup is not None and coup.held is not None:
        if eng.button and coup.dealing:
            yield from result(eng, f)  # held there, or it tells what the gap held
        else:
            coup.held.append(f)
        return
    elif coup is not None and coup.dealing:
        if f.winner == "quit":
            yield from article_x.void_misdeal(
                eng, f.t, coup, "SHOE_DISAGREES", "the device forced the coup to quit"
            )
        elif tableau.next_position(eng, coup) is None:
            # compared with the tableau at settlement; a result announced
            # early (a third card still due) is a PREMATURE_RESULT, not
            # the shoe's view of the finished coup
            coup.device_result = f
    yield from result(eng, f)


def after_card(eng: Engine, s: Shoe, coup: Coup, f: Card) -> Work | None:
    """A card placed in a live coup: where it leaves the coup. Its tableau
    complete, the coup ends there with the automatic boundary (with the
    RESULT button, at the dealer's RESULT); the due card after an early
    RESULT corrects it and ends the coup; a card still due when the shoe is
    empty voids it."""
    nxt = tableau.next_position(eng, coup)
    if nxt is None:
        if coup.premature:
            article_x.correct(
                eng, f.t, coup, "PREMATURE_RESULT", "the due card was dealt after an early RESULT"
            )
            return _close_after_due_card(eng, s, coup, f)
        elif not eng.button or not coup.dealing:
            return close_dealing(eng, coup, f.t)
    elif s.comp.cards_left == 0:
        detail = f"the shoe ran out with {nxt} still due"
        return article_x.void_misdeal(eng, f.t, coup, "SHOE_EXHAUSTED", detail)
    return None


def after_void_card(eng: Engine, coup: Coup, f: Card) -> Work | None:
    """A card placed in a void coup: with the automatic boundary the coup
    ends once its tableau is complete (its cards are shown till then)."""
    if not eng.button and tableau.next_position(eng, coup) is None:
        return close_dealing(eng, coup, f.t)
    return None


def void_for_card(eng: Engine, coup: Coup, f: Card, problem: tuple[str, str]) -> Work:
    """A card the shoe cannot hold (foreign, off the shuffler's order)
    voids its coup; with the automatic boundary the coup ends there."""
    yield from article_x.void_for(eng, f.t, coup, problem)
    if not eng.button:
        yield from close_dealing(eng, coup, f.t)


def _close_after_due_card(eng: Engine, s: Shoe, coup: Coup, f: Card) -> Work:
    yield from close_dealing(eng, coup, f.t)
    if eng.button and s.after_premature is None:
        # the dealer usually presses RESULT again: cards before it
        # are extra cards of this coup, four are the next coup
        s.after_premature = []
        s.after_premature_coup = coup.number


#: cards past a coup's complete tableau, before a RESULT, that make them
#: the next coup's (the dealer did not press RESULT): every coup has 4 to 6
MIN_COUP_CARDS = 4


def past_tableau(eng: Engine, s: Shoe, coup: Coup, f: Card) -> Work:
    """A card after the live coup's tableau completed, before the dealer's
    RESULT: an extra card, or the first of the next coup if the dealer did
    not press RESULT (docs/dealing-errors.md, "Dealing errors": fewer than four cards before
    the next RESULT are its extra cards, four or more the next coup).

    The bytes cannot tell which until the RESULT or a fourth card comes, so
    the cards wait in ``coup.past`` (nothing is shown of them yet): the
    RESULT places them as extra cards (``result``, by the profile's
    ``extra_card``), a fourth card makes them the next coup's: the coup
    ends as dealt, flagged ``MISSING_RESULT``, and they open the next one.
    Only a frame that may have ended the wait unseen (a loss on the line,
    another button, a shoe's end: ``ends_past_wait``) places them as
    extra cards first, as they were read before this wait existed. Where
    the device labels each card's place (Angel Eye), only an unread card
    waits: its labels tell, a card it places on P1 (or an unread card
    before one it places on B1) opening the next coup."""
    if not eng.button or not coup.dealing or coup.void_code is not None:
        yield from extra_card(eng, s, coup, f)
        return
    if f.hand is not None:
        # (only an unread card waits: the device labels every card it reads)
        opener = [coup.past.pop()] if f.hand == "B1" and coup.past else []
        yield from past_as_extras(eng, s, coup)
        if f.hand != "P1" and not opener:
            yield from extra_card(eng, s, coup, f)
            return
        # a card it places on P1, or an unread card before one it places
        # on B1 (that card stood on P1), opens the next coup
        yield from _next_coup_began(eng, coup, [*opener, f], f.t)
        return
    coup.past.append(f)
    if sum(isinstance(x, Card) for x in coup.past) >= MIN_COUP_CARDS:
        cards, coup.past = coup.past, []
        yield from _next_coup_began(eng, coup, cards, f.t)


def _next_coup_began(eng: Engine, coup: Coup, cards: Sequence[Card | DeviceSeen], t: float) -> Work:
    """The cards after ``coup``'s complete tableau are the next coup's: the
    dealer did not press RESULT. The coup ends as dealt (settled unless
    something else keeps it open), flagged, and the cards open the next."""
    shown = ", ".join(c.card or "unread" for c in cards if isinstance(c, Card))
    detail = (
        f"no RESULT after the complete tableau: the card(s) after it ({shown}) "
        "are the next coup's; this coup ends as dealt"
    )
    article_x.correct(eng, t, coup, "MISSING_RESULT", detail)
    yield from close_dealing(eng, coup, t)
    yield from release(cards)


def past_as_extras(eng: Engine, s: Shoe, coup: Coup) -> Work:
    """The cards waiting past ``coup``'s complete tableau are its extra
    cards: each placed as it would have been at once, by the profile's
    ``extra_card`` (a coup they void takes the rest as its extras)."""
    cards, coup.past = coup.past, []
    for c in cards:
        if isinstance(c, DeviceSeen):
            yield c  # (a fault that came among them: in this coup)
        elif coup.void_code is not None:
            dealing.deal_void(eng, s, coup, c)
        else:
            yield from extra_card(eng, s, coup, c)


def past_of_void(eng: Engine, coup: Coup) -> None:
    """``coup`` is made void while cards wait past its complete tableau:
    they are its extra cards (listed in its ``coup.void``)."""
    s = eng.shoe
    cards, coup.past = coup.past, []
    if s is not None:
        for c in cards:
            if isinstance(c, Card):  # (a fault among them: nothing left to flag)
                dealing.deal_void(eng, s, coup, c)


#: frames that leave the cards waiting past a complete tableau waiting (or
#: decide them: a card, the RESULT): a status, a cut card, the link's chatter
_PAST_WAITS = (Card, DeviceResult, CutCard, Status, HostRequest, Ack)


def ends_past_wait(frame: Frame) -> bool:
    """Whether ``frame`` places the cards waiting past a complete tableau
    as extra cards before it applies (``Engine._dispatch``): a loss on the
    line (it may have held the RESULT or the next cards), another button
    (NEWSHOE, REDEAL), the next shoe's shuffle."""
    if isinstance(frame, Button):
        return frame.name != "RESULT"
    return not isinstance(frame, _PAST_WAITS)


def extra_card(eng: Engine, s: Shoe, coup: Coup, f: Card) -> Work:
    """A card after the tableau completed, before the dealer's RESULT."""
    policy = eng.rules["extra_card"]
    if not coup.dealing:
        policy = "burn"  # its coup is over; nothing else is possible
    detail = f"a card ({f.card or 'unread'}) left the shoe after the tableau was complete"
    if policy == "next_coup" and not coup.carry:
        # dealt (and checked) as the first card of the next coup once the
        # dealer's RESULT closes this one
        coup.carry.append(f)
        article_x.correct(eng, f.t, coup, "EXTRA_CARD", detail + "; it opens the next coup")
        return
    problem = dealing.set_aside(eng, s, coup, f)
    if problem is not None:
        yield from article_x.void_for(eng, f.t, coup, problem)
    elif policy == "void":
        yield from article_x.void_misdeal(eng, f.t, coup, "EXTRA_CARD", detail)
    else:
        article_x.correct(eng, f.t, coup, "EXTRA_CARD", detail + "; burned")
