"""Article X: dealing errors (misdeals) flagged, corrected or made void.

Owns the misdeal codes (:class:`MisdealCode`) and the one table of what each
allows (:data:`POLICY`: whether it holds the coup's later frames, what
clears it, what the engine does at once, and the deadline); how a coup's
misdeal is opened (``misdeal``: counted, a deadline when a supervisor is
awaited), corrected (``correct``), expired at its deadline
(``expire``) and how a coup is made void (``void``: never settled, what it
held dealt on); and what happens once a misdeal is resolved
(``after_resolution``: held frames released, the coup settled).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Final, NamedTuple

from controller.engine import analytics, boundary, loss, machine, shoe, tableau
from controller.engine.state import AWAITING, Coup, Shoe, Work, release
from controller.event_types import CoupVoid, Misdeal, MisdealAction
from controller.events import format_ts
from firmware_protocols.frames import Card, Frame

if TYPE_CHECKING:
    from controller.engine.facade import Engine


class MisdealCode(StrEnum):
    """The dealing errors of Article X (the ``code`` of ``misdeal`` and
    ``coup.void`` events; a StrEnum, so each is its own string)."""

    UNREAD_CARD = "UNREAD_CARD"
    SEQUENCE_GAP = "SEQUENCE_GAP"
    WRONG_HAND = "WRONG_HAND"
    DEVICE_FAULT = "DEVICE_FAULT"
    PREMATURE_RESULT = "PREMATURE_RESULT"
    EXTRA_CARD = "EXTRA_CARD"
    SHOE_DISAGREES = "SHOE_DISAGREES"
    FOREIGN_CARD = "FOREIGN_CARD"
    SHUFFLE_MISMATCH = "SHUFFLE_MISMATCH"
    SHOE_EXHAUSTED = "SHOE_EXHAUSTED"
    CUT_CARD_OVERRUN = "CUT_CARD_OVERRUN"
    REDEAL = "REDEAL"
    SUPERVISOR_VOID = "SUPERVISOR_VOID"
    SHOE_ENDED = "SHOE_ENDED"
    MISSING_RESULT = "MISSING_RESULT"


class Remedy(StrEnum):
    """What clears an open misdeal before its deadline."""

    DEVICE = "device"  # it resumes with an unbroken sequence (STAT OK, or the next frame)
    DUE_CARD = "due card"  # the card the tableau still wanted is dealt
    NEXT_RESULT = "next RESULT"  # it tells the frames lost held nothing of this coup
    ENTER_CARD = "enter_card"  # the supervisor enters the card(s)
    ACCEPT = "accept"  # the supervisor accepts the coup as dealt


VOID: Final = "void"
CORRECTED: Final = "corrected"


class Policy(NamedTuple):
    """One row of Article X's table.

    ``holds``: while open, the coup's later frames are held (their positions
    cannot be known); ``cleared_by``: what corrects it; ``actions``: what the
    engine may do at the frame that reveals it (``awaiting_supervisor``:
    open until cleared or the deadline); ``deadline``: what happens if not
    cleared in time; ``when``: which action applies."""

    holds: bool
    cleared_by: tuple[Remedy, ...]
    actions: tuple[str, ...]
    deadline: str
    when: str


_DEADLINE = "void after correction_deadline_s, or once MAX_HELD frames wait behind it"
_NONE = "-"

#: Article X's policy, one row per code: the only place the engine says
#: which code holds frames, what clears it and what it does.
POLICY: dict[MisdealCode, Policy] = {
    MisdealCode.UNREAD_CARD: Policy(
        True, (Remedy.ENTER_CARD,), (AWAITING,), _DEADLINE, "a card (or the burn's first) passed unread"
    ),
    MisdealCode.SEQUENCE_GAP: Policy(
        True,
        (Remedy.NEXT_RESULT, Remedy.ENTER_CARD, Remedy.ACCEPT),
        (AWAITING, VOID),
        _DEADLINE,
        "frames lost mid-coup: awaited; a coup whose number is unknown, or lost whole: void",
    ),
    MisdealCode.WRONG_HAND: Policy(
        False, (Remedy.ACCEPT,), (AWAITING,), _DEADLINE, "the device put a card on another hand"
    ),
    MisdealCode.DEVICE_FAULT: Policy(
        False,
        (Remedy.DEVICE, Remedy.ACCEPT),
        (AWAITING,),
        _DEADLINE,
        "a fault or disconnect mid-coup",
    ),
    MisdealCode.PREMATURE_RESULT: Policy(
        False,
        (Remedy.DUE_CARD,),
        (AWAITING, VOID),
        _DEADLINE,
        "RESULT with a third card due: awaited; before four cards, or the coup closed short: void",
    ),
    MisdealCode.EXTRA_CARD: Policy(
        False, (), (CORRECTED, VOID), _NONE, "the profile's extra_card: burn, next_coup (corrected) or void"
    ),
    MisdealCode.SHOE_DISAGREES: Policy(
        False, (), (CORRECTED, VOID), _NONE, "every card read: the tableau stands; a card unread: void"
    ),
    MisdealCode.FOREIGN_CARD: Policy(False, (), (VOID,), _NONE, "a card this shoe cannot hold"),
    MisdealCode.SHUFFLE_MISMATCH: Policy(False, (), (VOID,), _NONE, "a card off the shuffler's order"),
    MisdealCode.SHOE_EXHAUSTED: Policy(False, (), (VOID,), _NONE, "the shoe ran out mid-coup"),
    MisdealCode.CUT_CARD_OVERRUN: Policy(False, (), (VOID,), _NONE, "a coup after the last permitted"),
    MisdealCode.REDEAL: Policy(False, (), (VOID,), _NONE, "the device announced a re-deal"),
    MisdealCode.SUPERVISOR_VOID: Policy(False, (), (VOID,), _NONE, "the supervisor's void"),
    MisdealCode.SHOE_ENDED: Policy(False, (), (VOID,), _NONE, "the shoe ended before the coup settled"),
    MisdealCode.MISSING_RESULT: Policy(
        False,
        (),
        (CORRECTED,),
        _NONE,
        "no RESULT: the next coup began past the tableau (4 cards, or one placed on P1): it ends as dealt",
    ),
}

#: The codes whose open misdeal holds the coup's later frames.
HOLDING = frozenset(c for c, p in POLICY.items() if p.holds)


def cleared_by(remedy: Remedy) -> tuple[MisdealCode, ...]:
    """The codes ``remedy`` clears, in the table's order."""
    return tuple(c for c, p in POLICY.items() if remedy in p.cleared_by)


#: What ``accept`` clears, in the order its corrections are reported.
ACCEPTABLE = cleared_by(Remedy.ACCEPT)
#: What ``enter_card`` clears.
ENTERABLE = cleared_by(Remedy.ENTER_CARD)


class PolicyError(RuntimeError):
    """The engine took an action Article X's table does not allow: a bug."""


def _allowed(code: str, action: str) -> None:
    policy = POLICY.get(code)  # type: ignore[call-overload]
    if policy is None or not (action in policy.actions or (action == VOID and policy.deadline == _DEADLINE)):
        raise PolicyError(f"misdeal {code}: {action!r} is not in Article X's table")


def misdeal(eng: Engine, t: float, coup: Coup, code: str, detail: str, action: MisdealAction) -> None:
    """Reports a misdeal of ``coup``: awaiting a supervisor (open, with its
    deadline), void (the caller voids the coup: see ``void_misdeal``) or
    corrected at once, as the code's row of :data:`POLICY` allows."""
    _allowed(code, action)
    if eng.shoe is not None:
        counts = eng.shoe.stats["misdeals"]
        counts[code] = counts.get(code, 0) + (action != "corrected")
    deadline = None
    if action == AWAITING:
        # a second error of the same kind does not push the deadline back
        dl = min(coup.open.get(code) or t + eng.deadline_s, t + eng.deadline_s)
        coup.open[code] = dl
        machine.sync(coup)
        deadline = format_ts(dl)
    eng._emit(
        t,
        Misdeal(coup=coup.number, code=code, detail=detail, action=action, deadline=deadline),
    )


def open_device_wait(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> None:
    """A misdeal the device itself can clear, with the deadline still running."""
    if code not in coup.open:
        misdeal(eng, t, coup, code, detail, AWAITING)


def correct(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> None:
    """A misdeal of ``coup`` corrected (by one of its remedies, or at once)."""
    policy = POLICY.get(code)  # type: ignore[call-overload]
    if policy is None or not (policy.cleared_by or CORRECTED in policy.actions):
        raise PolicyError(f"misdeal {code}: nothing corrects it in Article X's table")
    coup.open.pop(code, None)
    machine.sync(coup)
    if code not in coup.corrections:
        coup.corrections.append(code)
    eng._emit(
        t,
        Misdeal(coup=coup.number, code=code, detail=detail, action="corrected", deadline=None),
    )


def void_misdeal(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> Work:
    """The misdeal that voids ``coup`` now: reported, then the coup void.
    A coup already void (or settled) has nothing left to void: no misdeal
    is reported on it (as ``void_for``, ``dealing.deal_void``)."""
    if coup.resolved:
        return
    misdeal(eng, t, coup, code, detail, VOID)
    yield from void(eng, t, coup, code, detail)


def void_for(eng: Engine, t: float, coup: Coup, problem: tuple[str, str] | None) -> Work:
    if problem is not None and not coup.resolved:
        code, detail = problem
        yield from void_misdeal(eng, t, coup, code, detail)


def void(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> Work:
    if coup.resolved:
        return
    # Its RESULT already came, early (a card still due): void now, it is
    # closed as if that RESULT came after the void (``boundary.result``),
    # and the cards up to the next RESULT tell whether they are its due
    # cards or the next coup's (an Angel Eye's labels at once: from the
    # first it places on P1, the next coup's; docs/dealing-errors.md).
    # Dealt on into it, they would all be its own, a coup lost from the count.
    early = coup.premature and coup.held is None and coup.dealing
    held = machine.void(coup, code)
    if coup.past:
        boundary.past_of_void(eng, coup)
    rest: list[Frame] = []  # frames held past its RESULT: the coups' after it
    phantom: list[Frame] = []  # the next coup's, its RESULT lost (``loss.void_phantom``)
    before = 0
    if held is not None:
        rest, phantom, before = yield from loss.discard_held(eng, coup, held, t)
    if coup.extras_unlisted:
        detail += f" ({coup.extras_unlisted} more extra cards, shown by their card events, not listed)"
    eng._emit(
        t,
        CoupVoid(coup=coup.number, code=code, article="X", detail=detail, cards=coup.as_dealt()),  # type: ignore[arg-type]
    )
    s = eng.shoe
    assert s is not None
    s.stats["void_coups"] += 1
    if eng._fault_coup == coup.number:
        eng._fault_coup = None
        eng._fault_waiting = None
    if early and coup.dealing:
        yield from boundary.close_dealing(eng, coup, t)
        boundary.await_due_cards(s, coup)
    elif not coup.dealing:
        s.coups.pop(coup.number, None)
        machine.coup_closed(s, coup.number)
        yield from shoe.maybe_finish_shoe(eng, t)
        analytics.publish_odds(eng, t)
    if phantom:
        yield from loss.void_phantom(eng, phantom, t, before)
    # frames held past the void coup's RESULT belong to the coups after it
    yield from release(rest)


def after_resolution(eng: Engine, coup: Coup, t: float) -> Work:
    """A misdeal of ``coup`` was resolved: release what it held, settle it
    if it is complete and nothing else is open."""
    s = eng.shoe
    assert s is not None
    released: list[Frame] = []
    if coup.held is not None and not coup.open.keys() & HOLDING:
        held = machine.unhold(coup)
        released = [Card(t, None, c) for c in coup.gap_entered] + held
        coup.gap_entered = []
        if s.current is None and coup.dealing:
            s.current = coup
    if coup.premature and coup.held is None and tableau.next_position(eng, coup) is None:
        yield from _due_card_entered(eng, s, coup, t)
    yield from release(released)
    if coup.resolved or coup.held is not None or coup.open:
        return
    nxt = tableau.next_position(eng, coup)
    if not coup.dealing:
        if nxt is None:
            yield from boundary.settle(eng, coup, t)
        else:
            detail = f"{nxt} was never dealt: the coup ended before its tableau was complete"
            yield from void_misdeal(eng, t, coup, "PREMATURE_RESULT", detail)
        if coup.resolved:
            s.coups.pop(coup.number, None)
        yield from shoe.maybe_finish_shoe(eng, t)
    elif nxt is None and not eng.button:
        yield from boundary.close_dealing(eng, coup, t)


def _due_card_entered(eng: Engine, s: Shoe, coup: Coup, t: float) -> Work:
    """The due card after an early RESULT came unread and a supervisor
    entered it: it was dealt, so it corrects the early RESULT as a due card
    read does (``boundary.after_card``), before anything the coup held is
    dealt on. A coup still dealing closes there and the dealer's RESULT
    after it is awaited as the second one; a coup a RESULT already closed
    (the unread card could not change its tableau) is settled by the caller."""
    if coup.dealing:
        work = boundary.after_card(eng, s, coup, Card(t, None, coup.cards[-1]))
        if work is not None:
            yield from work
        return
    correct(eng, t, coup, "PREMATURE_RESULT", "the due card was dealt after an early RESULT")


def expire(eng: Engine, now: float) -> Work:
    s = eng.shoe
    # checked on every frame: most have no coup with an open misdeal
    if s is None or not any(c.open for c in s.coups.values()):
        return
    for coup in sorted(s.coups.values(), key=lambda c: c.number):
        if coup.resolved or not coup.open:
            continue
        due = [(dl, code) for code, dl in coup.open.items() if dl is not None and dl <= now]
        if due:
            dl, code = min(due)
            detail = f"not corrected within {eng.deadline_s:g} s"
            eng._emit(
                dl,
                Misdeal(coup=coup.number, code=code, detail=detail, action="void", deadline=None),
            )
            yield from void(eng, dl, coup, code, detail)
