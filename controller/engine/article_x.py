"""Article X: dealing errors (misdeals) flagged, corrected or made void.

Owns how a coup's misdeal is opened (``misdeal``: counted, a deadline when
a supervisor is awaited), corrected (``correct``), expired at its deadline
(``expire``) and how a coup is made void (``void``: never settled, what it
held dealt on); and what happens once a misdeal is resolved
(``after_resolution``: held frames released, the coup settled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.engine import analytics, boundary, loss, shoe, tableau
from controller.engine.state import AWAITING, Coup, Work, release
from controller.events import format_ts
from firmware_protocols.frames import Card, Frame

if TYPE_CHECKING:
    from controller.engine.facade import Engine


def misdeal(eng: Engine, t: float, coup: Coup, code: str, detail: str, action: str) -> None:
    if eng.shoe is not None:
        counts = eng.shoe.stats["misdeals"]
        counts[code] = counts.get(code, 0) + (action != "corrected")
    deadline = None
    if action == AWAITING:
        # a second error of the same kind does not push the deadline back
        dl = min(coup.open.get(code) or t + eng.deadline_s, t + eng.deadline_s)
        coup.open[code] = dl
        deadline = format_ts(dl)
    eng._emit(
        "misdeal",
        t,
        {"coup": coup.number, "code": code, "detail": detail, "action": action, "deadline": deadline},
    )


def open_device_wait(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> None:
    """A misdeal the device itself can clear, with the deadline still running."""
    if code not in coup.open:
        misdeal(eng, t, coup, code, detail, AWAITING)


def correct(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> None:
    coup.open.pop(code, None)
    if code not in coup.corrections:
        coup.corrections.append(code)
    eng._emit(
        "misdeal",
        t,
        {"coup": coup.number, "code": code, "detail": detail, "action": "corrected", "deadline": None},
    )


def void_for(eng: Engine, t: float, coup: Coup, problem: tuple[str, str] | None) -> Work:
    if problem is not None and not coup.resolved:
        code, detail = problem
        misdeal(eng, t, coup, code, detail, "void")
        yield from void(eng, t, coup, code, detail)


def void(eng: Engine, t: float, coup: Coup, code: str, detail: str) -> Work:
    if coup.resolved:
        return
    coup.void_code = code
    coup.open.clear()
    coup.premature = False
    held, coup.held = coup.held, None
    rest: list[Frame] = []  # frames held past its RESULT: the coups' after it
    phantom: list[Frame] = []  # the next coup's, its RESULT lost (``loss.void_phantom``)
    before = 0
    if held is not None:
        rest, phantom, before = yield from loss.discard_held(eng, coup, held, t)
    if coup.extras_unlisted:
        detail += f" ({coup.extras_unlisted} more extra cards, shown by their card events, not listed)"
    eng._emit(
        "coup.void",
        t,
        {"coup": coup.number, "code": code, "article": "X", "detail": detail, "cards": coup.as_dealt()},
    )
    s = eng.shoe
    assert s is not None
    s.stats["void_coups"] += 1
    if eng._fault_coup == coup.number:
        eng._fault_coup = None
        eng._fault_waiting = None
    if not coup.dealing:
        s.coups.pop(coup.number, None)
        if s.last_coup is not None and coup.number >= s.last_coup:
            s.dealing_over = True
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
    if coup.held is not None and not coup.open.keys() & {"UNREAD_CARD", "SEQUENCE_GAP"}:
        held, coup.held = coup.held, None
        entered = [Card(t, None, c) for c in coup.gap_entered]
        coup.gap_entered = []
        if s.current is None and coup.dealing:
            s.current = coup
        yield from release(entered + held)
    if coup.resolved or coup.held is not None or coup.open:
        return
    nxt = tableau.next_position(eng, coup)
    if not coup.dealing:
        if nxt is None:
            yield from boundary.settle(eng, coup, t)
        else:
            detail = f"{nxt} was never dealt: the coup ended before its tableau was complete"
            misdeal(eng, t, coup, "PREMATURE_RESULT", detail, "void")
            yield from void(eng, t, coup, "PREMATURE_RESULT", detail)
        if coup.resolved:
            s.coups.pop(coup.number, None)
        yield from shoe.maybe_finish_shoe(eng, t)
    elif nxt is None and not eng.button:
        yield from boundary.close_dealing(eng, coup, t)


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
                "misdeal",
                dl,
                {"coup": coup.number, "code": code, "detail": detail, "action": "void", "deadline": None},
            )
            yield from void(eng, dl, coup, code, detail)
