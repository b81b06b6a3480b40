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


_NEW, _DEALING, _FLAGGED, _EARLY, _HELD, _CLOSED_OPEN, _SETTLED, _VOID_DEALING, _VOID_HELD, _VOID = CoupState


def coup_state(c: Coup) -> CoupState:
    """The state a coup's fields describe."""
    if c.settled:
        return _SETTLED
    if c.void_code is not None:
        if not c.dealing:
            return _VOID
        return _VOID_HELD if c.held is not None else _VOID_DEALING
    if not c.dealing:
        return _CLOSED_OPEN
    if c.held is not None:
        return _HELD
    if c.premature:
        return _EARLY
    return _FLAGGED if c.open else _DEALING


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
    if s is not None:
        cur = s.current
        if len(watch) == 1:
            # (most calls: one coup in play, seen before, in the same state;
            # another coup it hides is seen at the next call that is not so)
            seen = watch.get(id(cur))
            if seen is not None and coup_state(seen[0]) is seen[1]:
                return
        for c in s.coups.values():
            if id(c) not in watch:
                watch[id(c)] = (c, _NEW)
        if cur is not None and id(cur) not in watch:
            watch[id(cur)] = (cur, _NEW)
    ended: list[int] = []
    for key, (c, before) in watch.items():
        now = coup_state(c)
        if now is before:
            continue
        if now not in COUP_TRANSITIONS[before]:
            raise IllegalTransition(f"coup {c.number}: {before} -> {now} is not in the table")
        if TRACE is not None:
            TRACE.add((before, now))
        watch[key] = (c, now)  # (a value replaced: the dict's size does not change)
        if now in TERMINAL:
            ended.append(key)
    for key in ended:
        del watch[key]
