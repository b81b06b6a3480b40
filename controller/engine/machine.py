"""The life of a shoe and of a coup as two state machines, each with every
legal transition in one table (as h11 keeps its own).

A shoe's phase (:class:`ShoePhase`, kept in ``Shoe.phase``) changes only
through :func:`set_phase`, which refuses a move :data:`SHOE_TRANSITIONS` does
not list. It is published as ``shoe/state``'s ``state`` through
:data:`PUBLISHED`, which keeps that string as it always was: ``dealing-over``
(the last permitted coup has finished dealing, the shoe ends once its coups
are settled or void) is published as ``deal``. A shoe's ``ended_emitted``
is its phase ``ended``; what stays a field is a fact, not a stage:
``announced`` (``shoe.started`` sent: at its first card, cut card or end,
in any phase), ``ended_by_rule`` (why it ended) and ``ending`` (its end
has begun, and stays set once ended: not a phase, since while its open
coups are voided the burn's phase still changes, ``loss.discard_held``, and
the frames they held are dealt on in it).

A coup's state (:class:`CoupState`, kept in ``Coup.state``) is the truth
about its life: whether it still takes cards (``Coup.dealing``), is settled
(``Coup.settled``) or void is read from it. Its life stages change only
through :func:`move` (opened, closed, settled), checked against
:data:`COUP_TRANSITIONS`. A coup still dealing is in one of the live states
(:data:`LIVE`), which say what it carries as data: frames held
(``Coup.held`` not None: ``held``, ``void-held``), a void code
(``void-*``), an early RESULT (``PREMATURE_RESULT`` open:
``early-result``), another misdeal open (``flagged``); whoever writes that
data calls :func:`sync`, which moves the coup to the live state the data
says, through the same check. A refused move raises
:class:`IllegalTransition`: a bug in the engine, never an input's fault.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.engine.state import Coup, Shoe
    from firmware_protocols.frames import Frame


class IllegalTransition(RuntimeError):
    """The engine moved a shoe or a coup where its table does not allow."""


class ShoePhase(StrEnum):
    """Where a shoe stands (its string is ``shoe/state``'s ``state``)."""

    BURN = "burn"  # its first card decides how many are burned
    BURN_UNKNOWN = "burn-unknown"  # the first card was unread: coup 1 waits for enter_card
    DEAL = "deal"  # coups are dealt
    DEALING_OVER = "dealing-over"  # the last permitted coup has finished dealing (published "deal")
    ENDED = "ended"  # shoe.ended sent


# The members by name, for the hot paths: ``ShoePhase.DEAL`` is looked up
# through the enum's metaclass on every use (about 80 ns on 3.11), a module
# name is not.
BURN, BURN_UNKNOWN, DEAL, ENDED = ShoePhase.BURN, ShoePhase.BURN_UNKNOWN, ShoePhase.DEAL, ShoePhase.ENDED
DEALING_OVER = ShoePhase.DEALING_OVER

#: phase -> ``shoe/state``'s ``state``: the strings it has always had
#: (``docs/engine-tables.md``)
PUBLISHED: dict[str, str] = {p: (DEAL if p is DEALING_OVER else p).value for p in ShoePhase}

#: phase -> {cause: next phase}: every way a shoe's phase changes.
SHOE_TRANSITIONS: dict[ShoePhase, dict[str, ShoePhase]] = {
    ShoePhase.BURN: {
        "first card unread": ShoePhase.BURN_UNKNOWN,
        "burn complete": ShoePhase.DEAL,
        "frames lost during the burn": ShoePhase.DEAL,
        "NEWSHOE and burn lost": ShoePhase.DEAL,
        # (only once coup 1, opened while the first card was unread, is void
        # in the burn entered by a supervisor, the cut card come before it:
        # the shoe ends at once, nothing else being open)
        "last coup dealt": ShoePhase.DEALING_OVER,
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.BURN_UNKNOWN: {
        "first card entered": ShoePhase.BURN,
        # (never "shoe ends": the coup holding the burn is voided first, which
        # ends the burn: loss.discard_held)
        "frames lost during the burn": ShoePhase.DEAL,
    },
    ShoePhase.DEAL: {
        "last coup dealt": ShoePhase.DEALING_OVER,
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.DEALING_OVER: {
        "last coup dealt": ShoePhase.DEALING_OVER,  # (an overrun coup, closed or void after it)
        "shoe ends": ShoePhase.ENDED,
    },
    ShoePhase.ENDED: {
        "last coup dealt": ShoePhase.ENDED,  # (an overrun coup after the end: over already)
        "shoe ends": ShoePhase.ENDED,  # (overrun coups after the last one close it again)
    },
}


#: a hook for tests: every (phase, cause) move ``set_phase`` makes is added to it
SHOE_TRACE: set[tuple[ShoePhase, str]] | None = None


def set_phase(s: Shoe, cause: str) -> None:
    """Moves the shoe on ``cause``, as :data:`SHOE_TRANSITIONS` says."""
    nxt = SHOE_TRANSITIONS[s.phase].get(cause)
    if nxt is None:
        raise IllegalTransition(f"shoe {s.id}: {cause!r} is no transition from phase {s.phase!r}")
    if SHOE_TRACE is not None:
        SHOE_TRACE.add((s.phase, cause))
    s.phase = nxt


def coup_closed(s: Shoe, number: int) -> None:
    """A coup of the shoe took its last card (closed, or void once closed):
    the last permitted one (or one past it) ends the dealing."""
    if s.last_coup is not None and number >= s.last_coup:
        set_phase(s, "last coup dealt")


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

# The members by name, for the hot paths (see BURN above).
NEW, DEALING, CLOSED, SETTLED, VOID = _NEW, _DEALING, _CLOSED, _SETTLED, _VOID

#: the states of a coup still dealing (it takes cards: no boundary yet)
LIVE = frozenset((_DEALING, _FLAGGED, _EARLY, _HELD, _VOID_DEALING, _VOID_HELD))
#: the states of a void coup
VOIDED = frozenset((_VOID_DEALING, _VOID_HELD, _VOID))

_PREMATURE = "PREMATURE_RESULT"  # (article_x.MisdealCode.PREMATURE_RESULT; no import cycle)


def live_state(c: Coup) -> CoupState:
    """The live state a coup still dealing is in, by what it carries: a void
    code, frames held, an early RESULT open, another misdeal open."""
    if c.void_code is not None:
        return _VOID_HELD if c.held is not None else _VOID_DEALING
    if c.held is not None:
        return _HELD
    if _PREMATURE in c.open:
        return _EARLY
    return _FLAGGED if c.open else _DEALING


def coup_state(c: Coup) -> CoupState:
    """The state a coup's data says it is in, given its life stage (whether
    it still deals): what ``c.state`` must be (tests check it after every
    call). A coup not dealing holds no frames and has a void code exactly
    when void; one that disagrees gets a state other than its own."""
    st = c.state
    if st in LIVE:
        return live_state(c)
    if c.held is not None:
        return _HELD  # (frames held by a coup not dealing: out of step)
    if c.void_code is not None:
        return _VOID
    return st if st is not _VOID else _CLOSED


_S = CoupState

#: state -> the states a coup may move to. A move is made by :func:`move`
#: (a life stage: opened, closed, settled, void) or :func:`sync` (what a
#: live coup carries changed); one step may cover a few writes (a void
#: clears what the coup held and its open misdeals at once). A coup opens dealing (or closed: one
#: lost whole, counted by the supervisor's numbering); it settles only once
#: closed; a void coup still dealing shows its cards until its boundary and
#: is never settled. Every move is taken by the capture corpus or, for those
#: only a supervisor's command makes, by a scenario in
#: ``tests/test_engine_transitions.py``.
COUP_TRANSITIONS: dict[CoupState, frozenset[CoupState]] = {
    _S.NEW: frozenset((_S.DEALING, _S.CLOSED)),
    _S.DEALING: frozenset((_S.FLAGGED, _S.EARLY_RESULT, _S.HELD, _S.CLOSED, _S.VOID_DEALING)),
    _S.FLAGGED: frozenset((_S.DEALING, _S.EARLY_RESULT, _S.HELD, _S.CLOSED, _S.VOID_DEALING)),
    # (its PREMATURE_RESULT is corrected by the due card, read or entered
    # (boundary.after_card, article_x.after_resolution): dealing, or flagged
    # if another misdeal is open; or voided (article_x.void). Closed by a
    # RESULT while its due card, unread, cannot change the tableau:
    # boundary.result.)
    _S.EARLY_RESULT: frozenset((_S.DEALING, _S.FLAGGED, _S.HELD, _S.CLOSED, _S.VOID_DEALING)),
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

#: a hook for tests: every (from, to) move a coup makes is added to it
TRACE: set[tuple[CoupState, CoupState]] | None = None


def move(c: Coup, to: CoupState) -> None:
    """Moves the coup to ``to``, refusing a move the table does not list."""
    before = c.state
    if to is before:
        return
    if to not in COUP_TRANSITIONS[before]:
        raise IllegalTransition(f"coup {c.number}: {before} -> {to} is not in the table")
    if TRACE is not None:
        TRACE.add((before, to))
    c.state = to


def sync(c: Coup) -> None:
    """Called wherever the engine writes what a live state is made of (the
    frames held, the void code, the open misdeals): moves a coup still
    dealing to the live state that data says (a closed coup stays closed:
    what it still has open is settled or voided from there)."""
    if c.state in LIVE:
        move(c, live_state(c))


def hold(c: Coup, frames: list[Frame]) -> None:
    """A coup still dealing starts holding its later frames (``frames``
    first): ``held``, or ``void-held`` if void."""
    if c.held is not None:
        raise IllegalTransition(f"coup {c.number}: holds frames already")
    c.held = frames
    move(c, _VOID_HELD if c.state in VOIDED else _HELD)


def unhold(c: Coup) -> list[Frame]:
    """A coup's hold ends: the frames it held (for the caller to place), the
    coup back to the live state its data says."""
    held, c.held = c.held, None
    if held is None:
        raise IllegalTransition(f"coup {c.number}: holds no frames")
    sync(c)
    return held


def close(c: Coup) -> None:
    """A coup's boundary came: it takes no more cards."""
    move(c, _VOID if c.state in VOIDED else _CLOSED)


def void(c: Coup, code: str) -> list[Frame] | None:
    """Makes the coup void with ``code``: its open misdeals and what it held
    are cleared (the held frames are returned, for the caller to place)."""
    c.void_code = code
    c.open.clear()
    held, c.held = c.held, None
    move(c, _VOID_DEALING if c.state in LIVE else _VOID)
    return held
