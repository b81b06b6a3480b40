"""Loss recovery: frames lost on the line (sequence gaps, device restarts).

Owns what a gap does to the coup in play (its later frames held until a
supervisor places what was lost), counting how many coup ends the lost
frames may hold (``ends_possible``), a coup lost whole (a phantom),
losing and restoring the coup numbering (``restore_numbering``: a
supervisor's number given while frames are held waits among them), the
bound on held frames and what a void coup's held frames become
(``discard_held``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from controller.cards import RANK_BURN
from controller.engine import article_x, boundary, dealing, machine, tableau
from controller.engine.machine import BURN, BURN_UNKNOWN
from controller.engine.state import AWAITING, BURN_HANDS, Coup, Shoe, Steps, Work, release
from controller.event_types import ShoeBurn
from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    DeviceResult,
    DeviceSeen,
    Frame,
    Hello,
    Link,
    Renumbered,
    SequenceGap,
)

if TYPE_CHECKING:
    from controller.engine.facade import Engine


#: Coup ends counted apart by ``_ends_possible``; more are "several".
_MAX_ENDS = 3

#: Stands for a loss of unknown size (a ``SequenceGap`` that is not
#: ``exact``: ``angel-eye/2``'s short seq cycle cannot tell how many whole
#: cycles were lost): more frames than ``_ends_possible`` needs for every
#: count of coup ends it tells apart, so every count fits. It is never
#: reported as a number (``_frames_lost``).
_UNKNOWN_LOSS = 6 + 1 + 5 * _MAX_ENDS + 6


def _lost(f: SequenceGap) -> int:
    """Frames a gap lost, for counting: its count if exact, else any number."""
    return max(1, f.missing) if f.exact else _UNKNOWN_LOSS


def _frames_lost(n: int) -> str:
    return f"{n} frames lost" if n < _UNKNOWN_LOSS else "frames lost (how many is unknown)"


#: The fewest cards a coup has (two to each hand): what a coup lost whole on
#: the line took from the shoe at least.
MIN_COUP_CARDS = 4

#: The most frames a coup holds while its positions are unknown: its own
#: remaining cards and RESULT, then every later frame of its shoe, kept so
#: they can be placed once a supervisor corrects it (docs/dealing-errors.md, "It never
#: guesses"). Only cards, RESULTs, device results, the cut card and gaps are
#: held, and a shoe of 12 decks has at most 624 cards and 156 coups (a RESULT
#: and a device result each): 937 frames. So 1024 lets a hold last out the
#: rest of any shoe, as the deadline means it to, while a device that keeps
#: sending cards (no shoe holds) cannot make the engine buffer without end.
#: The frame past it voids the coup as its deadline would, and what it held
#: is dealt on.
MAX_HELD = 1024


def _ends_possible(k: int, need: int, items: list[int], result: bool) -> set[int]:
    """How many coup ends (RESULTs) the frames lost on the line may hold.

    ``k``: the tableau cards read of the coup in play when frames were first
    lost, ``need``: how many more cards it needed at least; ``items``: what
    came since, in order, ``0`` for a card read and ``n > 0`` for ``n``
    frames lost; ``result``: whether a RESULT closes them (else the count is
    open). Every coup has 4 to 6 cards and a RESULT; a frame lost may be
    anything (a card, a RESULT, a status), so more frames than a count needs
    never rule it out. Cards read beyond a complete tableau are extra cards,
    a dealing error in sight: of the counts that fit, those that need the
    fewest of them are kept (one coup of seven cards read is a coup with an
    extra card, not seven cards of two coups). If no count fits, none is
    taken. Counts above ``_MAX_ENDS`` are folded into it."""
    complete = need == 0 and k >= 4  # any card now is an extra card
    states = {(0, k): 0}  # (ends so far, cards of the coup now in play) -> extras read

    def keep(into: dict[tuple[int, int], int], key: tuple[int, int], cost: int) -> None:
        if cost < into.get(key, cost + 1):
            into[key] = cost

    for n in items:
        nxt: dict[tuple[int, int], int] = {}
        for (e, c), cost in states.items():
            if n == 0:
                extra = c >= 6 or (e == 0 and complete)
                keep(nxt, (e, min(6, c + 1)), cost + extra)
                continue
            for add in range(min(n, 6 - c) + 1):
                keep(nxt, (e, c + add), cost)
            # the coup in play still needs what it needed less what it got
            due = max(need - (c - k) if e == 0 else 0, 4 - c)
            if c + due > 6:
                continue
            j = 1
            while (used := due + 1 + 5 * (j - 1)) <= n and e + j <= _MAX_ENDS:
                for c2 in range(min(n - used, 6) + 1):
                    keep(nxt, (e + j, c2), cost)
                j += 1
            if used <= n:  # more ends than counted apart
                keep(nxt, (_MAX_ENDS, 0), cost)
        states = nxt
    fits = {key: cost for key, cost in states.items() if not result or 4 <= key[1] <= 6}
    if not fits:
        return {0}
    least = min(fits.values())
    return {e for (e, _), cost in fits.items() if cost == least}


def _early_next(
    eng: Engine, coup: Coup, head: list[Frame], rest: list[Frame], ends: tuple[type, ...]
) -> None:
    """Frames lost in ``coup`` that held none of its end by the cards up
    to its first held RESULT, then fewer than four cards and a RESULT:
    those are its due cards after a RESULT pressed early (``discard_held``
    keeps them with it). But the frames lost may also have held its
    RESULT, the first held RESULT then being the next coup's, pressed
    before its fourth card, and the cards after it that coup's due cards
    (docs/dealing-errors.md, "Dealing errors"). If the cards read fit that reading too,
    the coups' count is not known: the numbering of the coups after it
    is lost (the lower count is kept, so the true next number is among
    those ``accept`` allows)."""
    second = next((i for i, f in enumerate(rest) if isinstance(f, ends)), None)
    if second is None:
        return
    seg = rest[:second]
    due = [f for f in seg if isinstance(f, Card)]
    if not due or len(due) >= MIN_COUP_CARDS or any(_loss(f) for f in seg):
        return
    other = ends_in(eng, coup, [*head, *due], result=True)
    if min(other) >= 1:
        lost = coup.gap_missing + sum(_lost(x) for x in head if isinstance(x, SequenceGap))
        lose_numbering(eng, head[-1].t if head else coup.t_start, coup, lost, {0} | other)


def _restart(f: Frame) -> bool:
    """A device restart among held frames (held as ``DeviceSeen``)."""
    return isinstance(f, Hello) or (isinstance(f, DeviceSeen) and isinstance(f.frame, Hello))


def _loss(f: Frame) -> bool:
    """A frame that says frames may have been lost on the line there."""
    return isinstance(f, (SequenceGap, Link)) or _restart(f)


def opens_coup(frames: Sequence[Frame], i: int) -> bool:
    """Whether the card at ``i`` opens a coup by the device's labels: it
    places it on P1, or it came unread (no label) and the next card read
    is placed on B1 (the unread card stood on P1)."""
    f = frames[i]
    if not isinstance(f, Card):
        return False
    if f.hand is not None:
        return f.hand == "P1"
    after = next((x for x in frames[i + 1 :] if isinstance(x, Card) and x.hand is not None), None)
    return after is not None and after.hand == "B1"


def _labelled(frames: list[Frame]) -> bool:
    """Whether the device labels these cards' places itself (Angel Eye)."""
    return any(isinstance(f, Card) and f.hand is not None and f.hand not in BURN_HANDS for f in frames)


def _coups(n: int) -> str:
    return f"{n} coup" if n == 1 else f"{n} coups"


def discard_held(
    eng: Engine, coup: Coup, held: list[Frame], t: float
) -> Steps[tuple[list[Frame], list[Frame], int]]:
    """A coup voided while its frames were held: its held cards left the
    shoe but their positions were never known, so they are reported as
    ``extra`` of the void coup, up to the first held RESULT; what follows
    that RESULT is dealt on as usual (returned first, for ``void`` to release).

    Two cases are told apart by counting cards, since a coup has 4 to 6:
    more than 6 before the first held RESULT means this coup's own RESULT
    was among the lost frames, so those cards are the next coup's (void
    too: returned second, with the number of coups lost whole before it
    third, for ``void_phantom``); fewer than 4 between the first and the
    second held RESULT are no coup but this coup's due cards after an
    early RESULT, and stay with it. With the automatic boundary nothing
    tells where the coup ended: every held card stays with it. Non-card
    frames before the first RESULT (a cut card) are applied before the
    coup is reported void, where they were dealt."""
    s = eng.shoe
    assert s is not None
    boundary = (Button, DeviceResult) if eng.button else ()
    first = next((i for i, f in enumerate(held) if isinstance(f, boundary)), None)
    head = held if first is None else held[:first]
    rest = [] if first is None else held[first + 1 :]
    if (
        first is None
        and boundary
        and coup.lost_frames
        and coup.anchor_prev is None
        and not any(_restart(f) or isinstance(f, Renumbered) for f in held)
        and ends_in(eng, coup, held, result=False) != {0}
    ):
        # No RESULT held, and the frames lost may hold this coup's end:
        # the cards held may be the next coup's, and only the next RESULT
        # tells how many coups ended among them (``ends_at_result``).
        # Taken here as this coup's extra cards, they would take a coup
        # out of the count: the void coup holds on until then (docs/dealing-errors.md,
        # "Coup numbers after a gap").
        machine.hold(coup, held)
        return [], [], 0
    if first is None:
        # no RESULT held: frames lost after this coup's cards (a gap, a
        # restart) still apply to what comes next
        lost = next((i for i, f in enumerate(held) if isinstance(f, SequenceGap) or _restart(f)), None)
        if lost is not None:
            head, rest = held[:lost], held[lost:]
    if s.phase in (BURN, BURN_UNKNOWN):
        # frames were lost during the burn: it cannot be finished by
        # count; it ends here, and the shoe is dealt on from here
        eng._alert(coup.t_start, "BURN_MISMATCH", "frames lost during the burn", coup.number)
        machine.set_phase(s, "frames lost during the burn")
        eng._emit(coup.t_start, ShoeBurn(first_card=s.first_card, burned=s.burned))
    own = len(coup.cards) + len(coup.extras)
    m = sum(isinstance(f, Card) for f in head)
    phantom = False
    phantom_frames: list[Frame] = []
    phantom_before = 0  # coups lost whole before the phantom
    if any(_restart(f) for f in head):
        # a device restart: how many frames it lost is unknown
        phantom = first is not None and own + m > 6
    elif (coup.lost_frames or any(isinstance(f, SequenceGap) for f in head)) and first is not None:
        # (without a loss the RESULT cannot have been lost: more than six
        # cards are then this coup's extra cards)
        ends = coup.ends if coup.ends is not None else min(ends_in(eng, coup, head, result=True))
        if coup.anchor_prev is not None:
            # this coup is the first end's; the RESULT held, the last's
            if ends >= 2:
                phantom_frames, phantom_before = held[first : first + 1], ends - 2
        elif ends >= 1:
            phantom = True
            phantom_before = ends - 1
        elif coup.ends is None:
            _early_next(eng, coup, head, rest, boundary)
    elif coup.lost_frames:
        ends_in(eng, coup, head, result=False)
    if phantom and first is not None:
        phantom_frames = held[: first + 1]
        # a cut card after the frames lost (this coup's RESULT among them)
        # came out in the phantom's coup: ``void_phantom`` applies it there
        # (applied here, it would make this coup the one the cut card
        # came in, and the last permitted coup one too early)
        cut = 0 if coup.gap_missing else next((i for i, f in enumerate(head) if _loss(f)), len(head))
        head = [
            f
            for i, f in enumerate(head)
            if not isinstance(f, Card) and not (i >= cut and isinstance(f, CutCard))
        ]
        second = next((i for i, f in enumerate(rest) if isinstance(f, boundary)), None)
        if _labelled(rest):
            # The device places each card itself (Angel Eye): the cards after
            # the phantom's RESULT that it places elsewhere than P1, up to
            # the next P1 or a loss on the line, are the phantom's own (due
            # cards after a RESULT pressed early, then extras), and the
            # RESULTs among them its (docs/dealing-errors.md: its labels
            # tell whose the cards are)
            stop = next((i for i, f in enumerate(rest) if _loss(f) or opens_coup(rest, i)), len(rest))
            theirs: list[Frame] = [f for f in rest[:stop] if isinstance(f, Card)]
            kept = [f for f in rest[:stop] if not isinstance(f, (Card, *boundary))]
            phantom_frames += theirs
            rest = kept + rest[stop:]
        elif (
            m < MIN_COUP_CARDS
            and second is not None
            and sum(isinstance(f, Card) for f in rest[:second]) < MIN_COUP_CARDS
            and not any(_loss(f) for f in rest[:second])
        ):
            # the phantom's RESULT came before its fourth card: no coup
            # ends there, and the cards up to the next RESULT are its due
            # cards (docs/dealing-errors.md, "Dealing errors"), not a coup of their own
            due: list[Frame] = [f for f in rest[:second] if isinstance(f, Card)]
            others: list[Frame] = [f for f in rest[:second] if not isinstance(f, Card)]
            phantom_frames += due
            rest = others + rest[second + 1 :]
    elif not phantom_frames and first is not None and _labelled(rest):
        # The device places each card itself (Angel Eye): a coup begins at
        # the card it places on P1 (docs/dealing-errors.md, "Dealing errors": its labels
        # tell whose the cards are). Cards after this coup's first RESULT
        # that it places elsewhere, up to the next P1 or a loss on the
        # line, are its own (due cards after a RESULT pressed early, then
        # extras), and the RESULTs among them its: counted as a coup of
        # their own they would shift every later number.
        stop = next((i for i, f in enumerate(rest) if _loss(f) or opens_coup(rest, i)), len(rest))
        head = head + [f for f in rest[:stop] if not isinstance(f, boundary)]
        rest = rest[stop:]
    elif not phantom_frames:
        second = next((i for i, f in enumerate(rest) if isinstance(f, boundary)), None)
        if (
            second is not None
            and sum(isinstance(f, Card) for f in rest[:second]) < 4
            # a coup short of cards because some were lost is a coup
            and not any(_loss(f) for f in rest[:second])
        ):
            head = head + rest[:second]
            rest = rest[second + 1 :]
    # a supervisor's number given while this coup held (``Renumbered``) is
    # for the coup dealt after the command: after this one, and after the
    # next coup's cards that came before it (the phantom's)
    given = [f for f in head if isinstance(f, Renumbered)]
    if given:
        head = [f for f in head if not isinstance(f, Renumbered)]
        rest = given + rest
    for f in head:
        if isinstance(f, Card):
            dealing.set_aside(eng, s, coup, f)
        elif not isinstance(f, SequenceGap):
            yield f
    machine.close(coup)
    if s.current is coup:
        s.current = None
    machine.coup_closed(s, coup.number)
    return rest, phantom_frames, phantom_before


def bound_held(eng: Engine, t: float) -> Work:
    """A coup holding more than ``MAX_HELD`` frames: one not corrected
    is void as at its deadline (its held cards up to the first held
    RESULT are its extra cards, what follows is dealt on); one already
    void, held to learn whose its frames are from the next RESULT that
    has not come, closes, and since those frames may hold coup ends the
    numbering of the coups after it is lost. Either way nothing past the
    bound is buffered."""
    s = eng.shoe
    while s is not None and s.current is not None:
        coup = s.current
        if coup.held is None or len(coup.held) <= MAX_HELD:
            return
        if not coup.resolved:
            code = min(coup.open, key=lambda c: coup.open[c] or float("inf"), default="SEQUENCE_GAP")
            detail = f"not corrected before {MAX_HELD} frames were held behind it"
            yield from article_x.void_misdeal(eng, t, coup, code, detail)
            continue
        held = machine.unhold(coup)
        lost = coup.gap_missing + sum(_lost(x) for x in held if isinstance(x, SequenceGap))
        lose_numbering(eng, t, coup, lost, {0, _MAX_ENDS})
        yield from boundary.close_dealing(eng, coup, t)
        yield from release([x for x in held if not isinstance(x, SequenceGap)])


def void_phantom(eng: Engine, frames: Sequence[Frame], t: float, before: int = 0) -> Work:
    """The coup whose RESULT and some frames were lost: its cards were
    read but cannot be placed. Counted (coups are numbered as dealt),
    reported, void; so are the ``before`` coups lost whole before it."""
    s = eng.shoe
    assert s is not None
    for _ in range(before):
        lost = yield from dealing.open_coup(eng, s, t)
        if not lost.resolved:
            detail = "lost whole on the line: counted from the cards read around the frames lost"
            yield from article_x.void_misdeal(eng, t, lost, "SEQUENCE_GAP", detail)
        yield from boundary.close_dealing(eng, lost, t)
    coup = yield from dealing.open_coup(eng, s, t)
    detail = "its frames were partly lost with the previous coup's RESULT: the cards cannot be placed"
    for f in frames:
        if isinstance(f, Card):
            dealing.set_aside(eng, s, coup, f)
        elif isinstance(f, CutCard):
            yield f  # it came out in this coup (after the RESULT lost)
    if not coup.resolved:  # (after the last coup: void already, CUT_CARD_OVERRUN)
        yield from article_x.void_misdeal(eng, t, coup, "SEQUENCE_GAP", detail)
    yield from boundary.close_dealing(eng, coup, t)
    cards = [f for f in frames if isinstance(f, Card)]
    first = next((i for i, f in enumerate(frames) if isinstance(f, Card)), len(frames))
    if (
        frames
        and isinstance(frames[-1], (Button, DeviceResult))
        and 0 < len(cards) < MIN_COUP_CARDS
        and opens_coup(cards, 0)
        and not any(_loss(f) for f in frames[first:])
    ):
        # Its first card read is one the device places on P1 (Angel Eye),
        # and no frame was lost after it: nothing of it was lost, so its
        # RESULT came before its fourth card, no coup's end. The cards up
        # to the next RESULT are its due cards or the next coup's, which
        # the labels tell (docs/dealing-errors.md); counted as a coup of
        # their own, they would take the next coup's number.
        boundary.await_due_cards(s, coup)


def unseen_loss(eng: Engine, f: Card) -> Work:
    """A card the device places on P1 while the coup in play, past its
    first two cards, still wants a card of its tableau: the device counted
    a coup end the engine never saw, so frames were lost that the seq did
    not show (lost at the top of a cycle not yet learned, or whole cycles).
    A loss of unknown size, as a gap of that size is (docs/devices.md, Angel Eye:
    the shoe's own placement of every card is what shows it), then the
    card, which the coup now holds."""
    detail = (
        "the device placed a card on P1 with the coup's tableau incomplete: frames were lost "
        "(how many is unknown)"
    )
    yield from on_gap(eng, SequenceGap(f.t, f.seq, f.seq or 0, 1, exact=False), detail)
    yield f


def _gap_detail(f: SequenceGap) -> str:
    if f.exact:
        return f"frames lost: expected sequence {f.expected}, received {f.seq} ({f.missing} missing)"
    return (
        f"frames lost: expected sequence {f.expected}, received {f.seq} (at least {f.missing} "
        "missing; how many more is unknown)"
    )


def on_gap(eng: Engine, f: SequenceGap, detail: str | None = None) -> Work:
    """Frames lost on the line (``detail``: what showed it, if not the seq)."""
    s = eng.shoe
    if detail is None:
        detail = _gap_detail(f)
    if eng._fault_coup is not None:
        eng._fault_waiting = None  # the sequence is broken: no automatic resume
    if s is None or s.ended_emitted:
        eng._alert(f.t, "SEQUENCE_GAP", detail, None)
        if s is not None:
            eng._lost_after_shoe += _lost(f)
        return
    coup = s.current
    if coup is not None and coup.held is not None:
        # held like any frame: once the frames before it are placed (or
        # voided) it applies where it happened
        coup.held.append(f)
        return
    if s.numbering_lost is not None:
        # every coup is void until the numbering is given back: there is
        # nothing left to hold frames for
        if coup is not None:
            coup.lost_frames = True
        if coup is None or not coup.dealing:
            # between coups: the next coup's first cards may be among them
            s.unseen_start = s.next_coup
        return
    if coup is not None and coup.dealing and coup.resolved:
        # A void coup has nothing left to correct: its cards are reported
        # until its RESULT. Unless its RESULT may be among the frames
        # lost: then what follows waits for the next RESULT, which tells
        # whose it is (_ends_at_result).
        need = tableau.need(eng, coup)
        coup.lost_frames = True  # its positions are no longer known
        if _lost(f) >= need + 1:
            machine.hold(coup, [])
            coup.gap_missing += _lost(f)
            coup.anchor_k, coup.anchor_need = len(coup.cards), need
        return
    prev: Coup | None = None
    if (
        coup is not None
        and coup.dealing
        and coup.void_code is None
        and tableau.next_position(eng, coup) is None
    ):
        # Every card of this coup was read and its tableau is complete:
        # what was lost came after it (its RESULT, an extra card, or the
        # next coup's first cards), so it stands; the next coup is held.
        prev = coup
        yield from boundary.close_dealing(eng, coup, f.t)
        coup = None
    if coup is None or not coup.dealing:
        # (the next coup is the one the supervisor numbered, if one was)
        nxt = s.next_coup if s.renumber_to is None else max(s.next_coup, s.renumber_to)
        if s.last_coup is not None and nxt > s.last_coup:
            # no coup is opened for it: one past the last is void at once,
            # and a void coup awaits no supervisor
            eng._alert(f.t, "SEQUENCE_GAP", detail + " after the last coup", None)
            return
        from controller.engine import shoe  # (shoe imports this module)

        if s.coups_count == 0 and shoe.burned_past_call(eng, s):
            # coup 1 opens here, not at a card it places on a hand: the
            # burn's count is told here (``shoe.before_coup_one``)
            assert s.first_card is not None
            called = eng.profile.burn_count(RANK_BURN[s.first_card[0]], eng.decks)
            eng._alert(
                f.t,
                "BURN_MISMATCH",
                f"the first card ({s.first_card}) calls for {called} burn card(s); {s.burned} burned: each "
                "card the device labelled burn is burned, and frames were lost before coup 1",
                s.next_coup,
            )
        coup = yield from dealing.open_coup(eng, s, f.t)
        if prev is not None:
            coup.anchor_prev, coup.anchor_k, coup.anchor_need = prev.number, len(prev.cards), 0
        else:
            coup.anchor_k, coup.anchor_need = 0, 4
    else:
        coup.anchor_k, coup.anchor_need = len(coup.cards), tableau.need(eng, coup)
    gap(eng, coup, f.t, _lost(f), detail)


def ends_at_result(eng: Engine, coup: Coup, f: Button | DeviceResult) -> Work:
    """The first RESULT after a gap that may have swallowed the end of the
    coup in play: the cards read since tell how many coups ended in the
    gap (``_ends_possible``). Where more than one count fits, the number
    of every later coup is unknown (``lose_numbering``)."""
    s = eng.shoe
    assert s is not None
    held: list[Frame] = coup.held if coup.held is not None else []
    ends = ends_in(eng, coup, held, result=True)
    coup.ends = min(ends)
    lost = coup.gap_missing + sum(_lost(x) for x in held if isinstance(x, SequenceGap))
    # one end, and not one frame of the next coup lost: it is whole
    whole = ends == {1} and lost == coup.anchor_need + 1 and s.numbering_lost is None
    frames: list[Frame] = [x for x in held if not isinstance(x, SequenceGap)]
    frames.append(f)
    if coup.void_code is not None:
        machine.unhold(coup)
        every = [*held, f]  # (the frames lost among them too: they apply where they came)
        given = next((i for i, x in enumerate(every) if isinstance(x, Renumbered)), None)
        if given is not None and ends != {0}:
            # A supervisor's number came while this void coup held, before
            # any RESULT: it names the coup dealt after the command, so the
            # frames after it are that coup's and those after (dealt on:
            # the number applies as they come). The cards before it, in the
            # stretch whose numbers are unknown, are this coup's extra
            # cards. (Counted as one phantom with the frames after the
            # number, they would put the number on the coup after that.)
            for x in every[:given]:
                if isinstance(x, Card):
                    dealing.set_aside(eng, s, coup, x)
            yield from boundary.close_dealing(eng, coup, f.t)
            before = [x for x in every[:given] if not isinstance(x, (Card, SequenceGap))]
            yield from release(before + every[given:])
            return
        if ends == {0}:
            yield from release(frames)  # the void coup's own cards and RESULT
            return
        # its RESULT was lost: what came since is the next coup's
        yield from boundary.close_dealing(eng, coup, f.t)
        if whole:
            yield from release(frames)
        else:
            yield from void_phantom(eng, [*held, f], f.t, min(ends) - 1)  # (its losses too)
            yield from release(
                [x for x in frames if not isinstance(x, (Card, Button, DeviceResult, CutCard))]
            )
        return
    prev = coup.anchor_prev
    if ends == {0}:
        # this RESULT is the coup before's: the frames lost came before
        # it (extra cards, a status), and this coup has lost nothing
        machine.unhold(coup)
        coup.lost_frames = False
        coup.gap_missing = 0
        for x in held:
            if isinstance(x, Card):
                if dealing.take(eng, s, x, None) is None:
                    eng._alert(
                        x.t,
                        "EXTRA_CARD",
                        f"a card ({x.card or 'unread'}) after the tableau of coup {prev}, before its "
                        "RESULT; burned",
                        prev,
                    )
                dealing.card_event(eng, x, prev, "extra")
            elif not isinstance(x, SequenceGap):
                yield x
        read = sum(isinstance(x, Card) for x in held)
        if 0 < read < MIN_COUP_CARDS:
            yield from _early_after_complete(eng, s, coup, prev, read, lost, f.t)
            return
        detail = f"the frames lost came before the RESULT of coup {prev}: nothing of this coup was lost"
        article_x.correct(eng, f.t, coup, "SEQUENCE_GAP", detail)
        return
    held.append(f)
    if whole:
        detail = f"the frame lost was the RESULT of coup {prev}: nothing of this coup was lost"
        article_x.correct(eng, f.t, coup, "SEQUENCE_GAP", detail)
        yield from article_x.after_resolution(eng, coup, f.t)


def _early_after_complete(
    eng: Engine, s: Shoe, coup: Coup, prev: int | None, read: int, lost: int, t: float
) -> Work:
    """``read`` (1-3) cards after frames lost past coup ``prev``'s complete
    tableau, then a RESULT (``ends_at_result``): extra cards of ``prev``
    and its RESULT, or (the frames lost holding its RESULT) ``coup``'s
    first cards and its RESULT pressed before its fourth card, its due
    cards to follow (docs/dealing-errors.md, "Dealing errors"). No byte
    tells, and the two readings number the coups after differently, so
    neither is taken: the numbering is lost from ``coup`` (void), the
    lower count kept (the cards read shown as extra cards of ``prev``).
    Read as its early RESULT, the cards up to the next RESULT are its due
    cards (none of it placed, its own cards): they wait for that RESULT,
    and as its first cards may have been lost, a supervisor's number
    given among them cannot be placed (``number_after_due``). Left
    dealing, the void coup would take the cards dealt after an accept,
    the next coup's."""
    lose_numbering(eng, t, coup, lost, {0, 1})
    detail = (
        f"the frames lost came before the RESULT of coup {prev}, or held it and this RESULT came "
        f"after {read} card(s) of this coup: its number is unknown"
    )
    yield from article_x.void_misdeal(eng, t, coup, "SEQUENCE_GAP", detail)
    s.unseen_start = coup.number
    yield from boundary.close_dealing(eng, coup, t)
    boundary.await_due_cards(s, coup)


def ends_in(eng: Engine, coup: Coup, held: list[Frame], *, result: bool) -> set[int]:
    """``_ends_possible`` for the frames a coup held since its gap; where
    more than one count fits, or more than one end, the numbering of
    the coups after it is lost (one end is told apart, not more)."""
    if coup.lost_frames:
        k, need, items = coup.anchor_k, coup.anchor_need, [coup.gap_missing]
    else:  # held for another reason (an unread card); frames lost since
        k, need, items = len(coup.cards), tableau.need(eng, coup), []
    for x in held:
        if isinstance(x, Card):
            items.append(0)
        elif isinstance(x, SequenceGap):
            items.append(_lost(x))
    if not any(items):
        if coup.lost_frames and need == 0 and k >= MIN_COUP_CARDS and len(items) - 1 >= MIN_COUP_CARDS:
            # A device restart after the coup's complete tableau (counted as
            # losing nothing), then four cards or more before the next
            # RESULT: the dealer did not press RESULT and began the next
            # coup (docs/dealing-errors.md, "A RESULT never pressed"), one coup end, not
            # the coup's extra cards (which would take a coup out of the
            # count).
            return {1}
        return {0}
    ends = _ends_possible(k, need, items, result)
    if len(ends) > 1 or _MAX_ENDS in ends:
        lost = sum(items)
        lose_numbering(eng, held[-1].t if held else coup.t_start, coup, lost, ends)
    return ends


def unnumbered(coup: Coup) -> bool:
    """A coup void from its opening only because its number is unknown
    (the numbering lost, ``dealing.open_coup``), nothing of it lost on the
    line: nobody at the table sees that void, so the dealer deals it as
    any coup, and a RESULT before its fourth card is an early press whose
    due cards follow (docs/dealing-errors.md, "Dealing errors"), not the end of a coup
    abandoned there. Counted as a coup of their own, those cards would
    make the true number of the next coup one ``accept`` refuses."""
    return coup.void_code == "SEQUENCE_GAP" and not coup.lost_frames


def lose_numbering(eng: Engine, t: float, coup: Coup, lost: int, ends: set[int]) -> None:
    """Frames lost may hold more than one count of coup ends: the coups
    after this one cannot be numbered. Each is void until a supervisor
    gives the number of the next coup (``accept``) or a new shoe starts."""
    s = eng.shoe
    assert s is not None
    if s.numbering_lost is not None:
        return
    s.window = (coup.number, coup.dealt_at_open)
    counts = sorted(ends)
    top = f"{_MAX_ENDS} or more" if counts[-1] == _MAX_ENDS else str(counts[-1])
    what = f"{counts[0]} to {top}" if len(counts) > 1 else top
    s.numbering_lost = f"the {_frames_lost(lost)} in coup {coup.number} may hold the end of {what} coups"
    eng._alert(
        t,
        "COUP_NUMBERING_LOST",
        s.numbering_lost + ": every later coup of this shoe is void until a supervisor sends accept "
        "with the number of the next coup to be dealt, or a new shoe starts",
        coup.number,
    )


def lose_past_numbering(eng: Engine, f: SequenceGap | Hello, coup: Coup, waiting: int, dealt: int) -> None:
    """Frames lost (a gap, or a device restart) while ``waiting`` cards
    waited past ``coup``'s complete tableau (``boundary.past_tableau``):
    they are placed as its extra cards, but with the frames lost and the
    cards after them they may have been the next coup's (the dealer
    pressed no RESULT), so how many coups were dealt is not known: the
    numbering is lost, never guessed. Its window starts at the coup after
    ``coup``, with the shoe's ``dealt`` cards before the waiting ones (they
    may be that coup's first)."""
    s = eng.shoe
    if s is None or waiting == 0 or s.numbering_lost is not None:
        return
    s.window = (coup.number + 1, dealt)
    what = (
        f"the {_frames_lost(_lost(f))}" if isinstance(f, SequenceGap) else "the frames a device restart lost"
    )
    s.numbering_lost = (
        f"{what} after {waiting} card(s) past the complete tableau of coup "
        f"{coup.number} may hold its end or the next coup's cards (no RESULT pressed)"
    )
    eng._alert(
        f.t,
        "COUP_NUMBERING_LOST",
        s.numbering_lost + ": every later coup of this shoe is void until a supervisor sends accept "
        "with the number of the next coup to be dealt, or a new shoe starts",
        coup.number + 1,
    )


def gap(eng: Engine, coup: Coup, t: float, missing: int, detail: str) -> None:
    coup.lost_frames = True
    coup.gap_missing += missing
    if coup.held is None:
        machine.hold(coup, [])
    if "SEQUENCE_GAP" not in coup.open:
        article_x.misdeal(eng, t, coup, "SEQUENCE_GAP", detail, AWAITING)


def restore_numbering(eng: Engine, s: Shoe, n: int, t: float) -> None:
    """``accept n`` while the numbering is lost: the supervisor names the
    next coup to be dealt at the table, after every frame the shoe has
    sent. Frames still held behind a coup awaiting a supervisor were
    dealt before the command, so the coups they open are not that next
    coup: the number waits among them where the command came (a
    ``Renumbered`` frame, ``on_renumbered``), and the coups they open
    before it stay in the stretch whose numbers are unknown (void).
    With nothing held, the next coup opened takes it."""
    cur = s.current
    if cur is not None and cur.held:
        cur.held.append(Renumbered(t, None, n, s.id))
        return
    if s.after_premature is not None:
        # cards waiting after an early RESULT were dealt before the
        # command too: a coup they open is not the next coup dealt; and
        # those after it may still be the void coup's due cards, which
        # the next RESULT (or a loss) tells (``number_before_due_cards``)
        s.after_premature.append(Renumbered(t, None, n, s.id))
        return
    s.numbering_lost = None
    s.renumber_to = n


def number_after_due(
    eng: Engine, s: Shoe, void: Coup, waiting: Sequence[Frame], due: int, *, closed: bool
) -> list[Frame]:
    """The frames that waited after ``void``'s early RESULT, less its first
    ``due`` cards (its due cards, dealt to it): what is dealt on, a
    supervisor's number (``Renumbered``) where it came among them.

    A number that came before one of its due cards was given while the
    void coup was still dealt: it is for the coup after it, so it goes
    before the rest. Unless the void coup's first cards may have been
    lost on the line (``Shoe.unseen_start``): its RESULT may then have
    been its end, not an early press, and the cards after it a coup of
    their own, not its due cards; so whether the cards after the number
    are the numbered coup's, or a coup's begun before it, no byte tells.
    A number with cards after it then cannot be placed, nor one with a
    card before it when a loss on the line, not the dealer's second
    RESULT (``closed``), ends the wait (the coup those cards began may
    have ended in the loss, or not): the numbering stays lost
    (docs/dealing-errors.md, "Coup numbers after a gap")."""
    early: list[Frame] = []
    out: list[Frame] = []
    seen = 0
    for x in waiting:
        if isinstance(x, Card):
            seen += 1
            if seen > due:
                out.append(x)
        elif seen < due:
            early.append(x)
        else:
            out.append(x)
    if s.unseen_start != void.number:
        return early + out
    last = max((i for i, x in enumerate(waiting) if isinstance(x, Card)), default=-1)
    if not closed and last >= 0:
        last = len(waiting)
    unplaced = [x for i, x in enumerate(waiting) if isinstance(x, Renumbered) and i < last]
    placed = [x for x in out if not any(x is y for y in unplaced)]
    if unplaced:
        numbers = ", ".join(str(x.coup) for x in unplaced)
        s.numbering_lost = (
            f"the supervisor's number {numbers} came among the cards after coup {void.number}'s RESULT "
            "before its fourth card, its first cards perhaps lost on the line: whether those after the "
            "number are its due cards, the numbered coup's or a coup's begun before it is not known"
        )
        eng._alert(
            unplaced[0].t,
            "COUP_NUMBERING_LOST",
            s.numbering_lost + ": every later coup of this shoe is void until a supervisor sends accept "
            "with the number of the next coup to be dealt, or a new shoe starts",
            None,
        )
        return placed
    return early + out


def on_renumbered(eng: Engine, f: Renumbered) -> None:
    """A supervisor's number that waited among held frames, reached once
    the frames before it were dealt on: the next coup opened takes it. If
    those frames opened that coup or later ones already, the number was
    not the next coup's: the numbering stays lost, and says so. (A number
    for a shoe that has ended, or is ending, applies to nothing.)"""
    s = eng.shoe
    if s is None or s.id != f.shoe or s.ending or s.ended_emitted:
        return
    if f.coup < s.next_coup:
        s.numbering_lost = (
            f"the supervisor's number {f.coup} came after frames held that were dealt as coups up to "
            f"{s.next_coup - 1}"
        )
        eng._alert(
            f.t,
            "COUP_NUMBERING_LOST",
            s.numbering_lost + ": every later coup of this shoe is void until a supervisor sends accept "
            "with the number of the next coup to be dealt, or a new shoe starts",
            None,
        )
        return
    s.numbering_lost = None
    s.renumber_to = f.coup


def renumber_range(eng: Engine, s: Shoe) -> tuple[int, str]:
    """The highest number ``accept`` may give the next coup while the
    numbering is lost, and why.

    From the first coup whose number may be wrong (``s.window``) to the
    one before the next to be dealt, every coup but the one in play was
    dealt in full, with at least ``MIN_COUP_CARDS`` cards: cards the
    shoe dealt since (read or unread, taken or still held), or cards
    among the frames lost on the line in this shoe, no more than the
    cards the engine has not seen (all of those after a device restart,
    which loses an unknown number of frames). With the RESULT button,
    each coup the engine did not count also lost its RESULT among those
    frames (or it is held). Frames lost are counted as they arrive and
    held frames are placed later, so they are taken since the shoe
    began, not since that coup. The first bound is at most (the shoe's
    cards + ``MAX_HELD``) / 4 + 1: one card after an ``accept`` voids at
    most 413 coups lost whole (12 decks; 157 with nothing held), two
    events each."""
    left = max(0, s.comp.cards_left)
    in_play = int(s.current is not None and s.current.dealing)
    w = s.window
    if w is None:  # (lost before windows were kept: a checkpoint)
        cap = s.comp.capacity // MIN_COUP_CARDS
        return s.next_coup + cap, f"a shoe of {s.comp.capacity} cards has at most {_coups(cap)}"
    first, dealt0 = w
    # (cards held or set aside for later are dealt, not yet taken)
    open_ = {id(c): c for c in [s.current, *s.coups.values()] if c is not None}.values()
    waiting = [x for c in open_ for x in [*(c.held or []), *c.carry]] + (s.after_premature or [])
    dealt = max(0, s.comp.dealt - dealt0) + sum(isinstance(x, Card) for x in waiting)
    unknown = eng._lost_unknown > s.loss_mark[1]
    lost = eng._lost_frames - s.loss_mark[0]
    lost_cards = left if unknown else min(lost, left)
    coups = (dealt + lost_cards) // MIN_COUP_CARDS
    high = max(s.next_coup, first + in_play + coups)
    since = (
        "frames were lost in this shoe in a number that cannot be known"
        if unknown
        else f"{lost} frames were lost in this shoe"
    )
    why = f"{dealt} cards dealt since coup {first}, and {since}: at most {_coups(coups)} of 4 cards"
    # a RESULT held is one the engine has not counted yet
    ends = lost + sum(isinstance(x, (Button, DeviceResult)) for x in waiting)
    if eng.button and not unknown and s.next_coup + ends < high:
        high = s.next_coup + ends
        why = f"{lost} frames were lost in this shoe: at most {lost} RESULTs not seen"
        if ends > lost:
            why += f", {ends - lost} held"
    return high, why
