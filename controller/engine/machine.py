"""The life of a shoe and of a coup as two state machines, each with every
legal transition in one table (as h11 keeps its own).

A shoe's phase (:class:`ShoePhase`, kept in ``Shoe.phase`` and published as
``shoe/state``'s ``state``) changes only through :func:`set_phase`, which
refuses a move :data:`SHOE_TRANSITIONS` does not list.

A coup's state (:class:`CoupState`) is what its fields say (:func:`coup_state`:
dealing or closed, held, an early RESULT, a misdeal open, settled, void);
after every call into the engine (``feed``, ``tick``, ``command``)
:func:`check` compares each coup's state with the one it last had and refuses
a move :data:`COUP_TRANSITIONS` does not list. A refused move raises
:class:`IllegalTransition`: a bug in the engine, never an input's fault.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.engine.facade import Engine
    from controller.engine.state import Coup, Shoe


class IllegalTransition(RuntimeError):
    """The engine moved a shoe or a coup where its table does not allow."""


class ShoePhase(StrEnum):
    """Where a shoe stands (its string is ``shoe/state``'s ``state``)."""

    BURN = "burn"  # its first card decides how many are burned
    BURN_UNKNOWN = "burn-unknown"  # the first card was unread: coup 1 waits for enter_card
    DEAL = "deal"  # coups are dealt
    ENDED = "ended"  # shoe.ended sent (or its last coup is being closed)


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
        "frames lost during the burn": ShoePhase.DEAL,
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.DEAL: {
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.ENDED: {
        "shoe ends": ShoePhase.ENDED,  # (overrun coups after the last one close it again)
    },
}


def set_phase(s: Shoe, cause: str) -> None:
    """Moves the shoe on ``cause``, as :data:`SHOE_TRANSITIONS` says."""
    nxt = SHOE_TRANSITIONS[ShoePhase(s.phase)].get(cause)
    if nxt is None:
        raise IllegalTransition(f"shoe {s.id}: {cause!r} is no transition from phase {s.phase!r}")
    s.phase = nxt


class CoupState(StrEnum):
    """Where a coup stands."""

    NEW = "new"  # (before it opens)
    DEALING = "dealing"  # takes cards; its boundary has not come
    FLAGGED = "flagged"  # takes cards, a misdeal open (awaiting a supervisor or the device)
    EARLY_RESULT = "early-result"  # a RESULT came with a third card due
    HELD = "held"  # positions unknown: its later frames wait
    CLOSED_OPEN = "closed-open"  # its boundary came, a misdeal still open
    SETTLED = "settled"
    VOID_DEALING = "void-dealing"  # void: its cards are shown until its boundary
    VOID_HELD = "void-held"  # void: frames wait for the RESULT that tells whose they are
    VOID = "void"


TERMINAL = frozenset((CoupState.SETTLED, CoupState.VOID))


def coup_state(c: Coup) -> CoupState:
    """The state a coup's fields describe."""
    if c.settled:
        return CoupState.SETTLED
    if c.void_code is not None:
        if not c.dealing:
            return CoupState.VOID
        return CoupState.VOID_HELD if c.held is not None else CoupState.VOID_DEALING
    if not c.dealing:
        return CoupState.CLOSED_OPEN
    if c.held is not None:
        return CoupState.HELD
    if c.premature:
        return CoupState.EARLY_RESULT
    return CoupState.FLAGGED if c.open else CoupState.DEALING


_S = CoupState
_LIVE = (_S.DEALING, _S.FLAGGED, _S.EARLY_RESULT, _S.HELD, _S.CLOSED_OPEN)
_VOIDED = (_S.VOID_DEALING, _S.VOID_HELD, _S.VOID)
_ENDS = (_S.SETTLED, *_VOIDED)

#: state -> the states a coup may be in after the engine's next call. Seen
#: once per call, so a move may cover several steps of one call (a coup that
#: opens and completes at once, a card that completes and settles it).
COUP_TRANSITIONS: dict[CoupState, frozenset[CoupState]] = {
    _S.NEW: frozenset((*_LIVE, *_ENDS)),
    _S.DEALING: frozenset((_S.FLAGGED, _S.EARLY_RESULT, _S.HELD, _S.CLOSED_OPEN, *_ENDS)),
    _S.FLAGGED: frozenset((_S.DEALING, _S.EARLY_RESULT, _S.HELD, _S.CLOSED_OPEN, *_ENDS)),
    _S.EARLY_RESULT: frozenset((_S.DEALING, _S.FLAGGED, _S.HELD, _S.CLOSED_OPEN, *_ENDS)),
    _S.HELD: frozenset((_S.DEALING, _S.FLAGGED, _S.EARLY_RESULT, _S.CLOSED_OPEN, *_ENDS)),
    _S.CLOSED_OPEN: frozenset((_S.SETTLED, _S.VOID)),
    _S.VOID_DEALING: frozenset((_S.VOID_HELD, _S.VOID)),
    _S.VOID_HELD: frozenset((_S.VOID_DEALING, _S.VOID)),
    _S.SETTLED: frozenset(),
    _S.VOID: frozenset(),
}

#: a hook for tests: every (from, to) move ``check`` sees is added to it
TRACE: set[tuple[CoupState, CoupState]] | None = None


def check(eng: Engine) -> None:
    """Compares every coup of the shoe in play (and those seen before, until
    they end) with the state it had after the engine's last call."""
    watch = eng._coup_states
    s = eng.shoe
    coups = list(s.coups.values()) if s is not None else []
    if s is not None and s.current is not None:
        coups.append(s.current)
    for c in coups:
        if id(c) not in watch:
            watch[id(c)] = (c, CoupState.NEW)
    for key, (c, before) in list(watch.items()):
        now = coup_state(c)
        if now is not before:
            if now not in COUP_TRANSITIONS[before]:
                raise IllegalTransition(f"coup {c.number}: {before} -> {now} is not in the table")
            if TRACE is not None:
                TRACE.add((before, now))
        if now in TERMINAL:
            del watch[key]
        else:
            watch[key] = (c, now)
