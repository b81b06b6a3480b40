"""The life of a shoe and of a coup as two state machines, each with every
legal transition in one table (as h11 keeps its own).

A shoe's phase (:class:`ShoePhase`, kept in ``Shoe.phase`` and published as
``shoe/state``'s ``state``) changes only through :func:`set_phase`, which
refuses a move :data:`SHOE_TRANSITIONS` does not list.

A coup's state (:class:`CoupState`, kept in ``Coup.state``) is what its
fields say (:func:`coup_state`: dealing or closed, held, an early RESULT, a
misdeal open, settled, void). Every place the engine writes one of those
fields calls :func:`moved`, which refuses a move :data:`COUP_TRANSITIONS`
does not list. A refused move raises :class:`IllegalTransition`: a bug in
the engine, never an input's fault.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.engine.state import Coup, Shoe


class IllegalTransition(RuntimeError):
    """The engine moved a shoe or a coup where its table does not allow."""


class ShoePhase(StrEnum):
    """Where a shoe stands (its string is ``shoe/state``'s ``state``)."""

    BURN = "burn"  # its first card decides how many are burned
    BURN_UNKNOWN = "burn-unknown"  # the first card was unread: coup 1 waits for enter_card
    DEAL = "deal"  # coups are dealt
    ENDED = "ended"  # shoe.ended sent (or its last coup is being closed)


# The members by name, for the hot paths: ``ShoePhase.DEAL`` is looked up
# through the enum's metaclass on every use (about 80 ns on 3.11), a module
# name is not.
BURN, BURN_UNKNOWN, DEAL, ENDED = ShoePhase.BURN, ShoePhase.BURN_UNKNOWN, ShoePhase.DEAL, ShoePhase.ENDED

#: phase -> {cause: next phase}: every way a shoe's phase changes.
SHOE_TRANSITIONS: dict[ShoePhase, dict[str, ShoePhase]] = {
    ShoePhase.BURN: {
        "first card unread": ShoePhase.BURN_UNKNOWN,
        "burn complete": ShoePhase.DEAL,
        "frames lost during the burn": ShoePhase.DEAL,
        "NEWSHOE and burn lost": ShoePhase.DEAL,
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.BURN_UNKNOWN: {
        "first card entered": ShoePhase.BURN,
        # (never "shoe ends": the coup holding the burn is voided first, which
        # ends the burn: loss.discard_held)
        "frames lost during the burn": ShoePhase.DEAL,
    },
    ShoePhase.DEAL: {
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.ENDED: {
        "shoe ends": ShoePhase.ENDED,  # (overrun coups after the last one close it again)
    },
}


#: a hook for tests: every (phase, cause) move ``set_phase`` makes is added to it
SHOE_TRACE: set[tuple[ShoePhase, str]] | None = None


def set_phase(s: Shoe, cause: str) -> None:
    """Moves the shoe on ``cause``, as :data:`SHOE_TRANSITIONS` says."""
    nxt = SHOE_TRANSITIONS[ShoePhase(s.phase)].get(cause)
    if nxt is None:
        raise IllegalTransition(f"shoe {s.id}: {cause!r} is no transition from phase {s.phase!r}")
    if SHOE_TRACE is not None:
        SHOE_TRACE.add((ShoePhase(s.phase), cause))
    s.phase = nxt


class CoupState(StrEnum):
    """Where a coup stands."""

    NEW = "new"  # (before it opens)
    DEALING = "dealing"  # takes cards; its boundary has not come
    FLAGGED = "flagged"  # takes cards, a misdeal open (awaiting a supervisor or the device)
    EARLY_RESULT = "early-result"  # a RESULT came with a third card due
    HELD = "held"  # positions unknown: its later frames wait
    CLOSED = "closed"  # its boundary came; not settled yet (a misdeal open, or being settled)
    SETTLED = "settled"
    VOID_DEALING = "void-dealing"  # void: its cards are shown until its boundary
    VOID_HELD = "void-held"  # void: frames wait for the RESULT that tells whose they are
    VOID = "void"


TERMINAL = frozenset((CoupState.SETTLED, CoupState.VOID))


_NEW, _DEALING, _FLAGGED, _EARLY, _HELD, _CLOSED, _SETTLED, _VOID_DEALING, _VOID_HELD, _VOID = CoupState


def coup_state(c: Coup) -> CoupState:
    """The state a coup's fields describe."""
    if c.settled:
        return _SETTLED
    if c.void_code is not None:
        if not c.dealing:
            return _VOID
        return _VOID_HELD if c.held is not None else _VOID_DEALING
    if not c.dealing:
        return _CLOSED
    if c.held is not None:
        return _HELD
    if c.premature:
        return _EARLY
    return _FLAGGED if c.open else _DEALING


_S = CoupState

#: state -> the states a coup may move to. A move is seen where a field is
#: written, so one step may cover a few writes (a void clears what the coup
#: held and its open misdeals at once). A coup opens dealing (or closed: one
#: lost whole, counted by the supervisor's numbering); it settles only once
#: closed; a void coup still dealing shows its cards until its boundary and
#: is never settled. Every move is taken by the capture corpus or, for those
#: only a supervisor's command makes, by a scenario in
#: ``tests/test_engine_transitions.py``.
COUP_TRANSITIONS: dict[CoupState, frozenset[CoupState]] = {
    _S.NEW: frozenset((_S.DEALING, _S.CLOSED)),
    _S.DEALING: frozenset((_S.FLAGGED, _S.EARLY_RESULT, _S.HELD, _S.CLOSED, _S.VOID_DEALING)),
    _S.FLAGGED: frozenset((_S.DEALING, _S.EARLY_RESULT, _S.HELD, _S.CLOSED, _S.VOID_DEALING)),
    # (never dealing: ``premature`` is set with its PREMATURE_RESULT misdeal
    # opened at once (boundary.result) and cleared only by the due card, read
    # or entered, before that misdeal is corrected (boundary.after_card,
    # article_x.after_resolution: flagged), or by a void (article_x.void).
    # Closed by a RESULT while its due card, unread, cannot change the
    # tableau: boundary.result.)
    _S.EARLY_RESULT: frozenset((_S.FLAGGED, _S.HELD, _S.CLOSED, _S.VOID_DEALING)),
    # (never closed: a held coup is the shoe's current one, its frames all
    # go to its hold, and close_dealing comes only after the hold is
    # released (article_x.after_resolution, loss.ends_at_result) or the coup
    # is void (article_x.void))
    _S.HELD: frozenset((_S.DEALING, _S.FLAGGED, _S.EARLY_RESULT, _S.VOID_DEALING)),
    _S.CLOSED: frozenset((_S.SETTLED, _S.VOID)),
    _S.VOID_DEALING: frozenset((_S.VOID_HELD, _S.VOID)),
    # (never void at once: article_x.void returns on a void coup, so
    # loss.discard_held never closes one; loss.ends_at_result, loss.bound_held
    # and shoe.end_shoe clear its hold (void-dealing) before closing it)
    _S.VOID_HELD: frozenset((_S.VOID_DEALING,)),
    _S.SETTLED: frozenset(),
    _S.VOID: frozenset(),
}

#: a hook for tests: every (from, to) move ``moved`` sees is added to it
TRACE: set[tuple[CoupState, CoupState]] | None = None


def moved(c: Coup) -> None:
    """Called wherever the engine writes a field a coup's state is made of:
    records the coup's new state, refusing a move the table does not list."""
    now = coup_state(c)
    before = c.state
    if now == before:
        return
    if now not in COUP_TRANSITIONS[before]:  # type: ignore[index]
        raise IllegalTransition(f"coup {c.number}: {before} -> {now} is not in the table")
    if TRACE is not None:
        TRACE.add((CoupState(before), now))
    c.state = now
