"""Device health: HELLO, status codes and the link.

Owns ``device.status`` events and the DEVICE_FAULT misdeal: a fault or a
disconnect mid-coup awaits the device resuming with an unbroken sequence
(STAT OK, or the next frame after the link comes back) or a supervisor.
A HELLO or a fault that comes while frames are held behind an earlier
coup has its ``device.status`` at once, and its effect on the game
waits among those frames (``held_behind``, ``on_seen``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.engine import article_x, boundary, dealing, loss, shoe, tableau
from controller.engine.machine import BURN, DEAL, DEALING_OVER
from controller.engine.state import FAULT_CODES, Coup, Work
from controller.event_types import UNSET, DeviceStatus
from firmware_protocols.frames import (
    Button,
    Card,
    DeviceResult,
    DeviceSeen,
    Hello,
    Link,
    Status,
)

if TYPE_CHECKING:
    from controller.engine.facade import Engine


def on_hello(eng: Engine, f: Hello) -> None:
    eng.device = {"model": f.model, "firmware": f.firmware, "serial": f.serial}
    eng._emit(f.t, DeviceStatus(state="online", code="HELLO", device=eng.device.copy()))
    if eng._fault_coup is not None:
        # the sequence restarted: frames may have been lost unseen, so
        # neither the next frame nor STAT OK says it resumed unbroken
        eng._fault_waiting = None
    if held_behind(eng, f):
        return
    restarted(eng, f)


def restarted(eng: Engine, f: Hello) -> None:
    """What a device restart does to the coup in play, where it came."""
    coup = coup_in_play(eng)
    if coup is not None:
        if not coup.lost_frames:
            # (what the coup had when the sequence broke: ``loss.ends_in``)
            coup.anchor_k, coup.anchor_need = len(coup.cards), tableau.need(eng, coup)
        # a restart breaks the sequence: frames may have been lost unseen
        loss.gap(eng, coup, f.t, 0, "the device restarted mid-coup; frames may have been lost")


def held_behind(eng: Engine, f: Hello | Status, seen: DeviceSeen | None = None) -> bool:
    """A HELLO, a fault, or the OK after a fault that waits, come while
    frames are held behind an earlier coup, past a RESULT it holds (its
    own frames, then later coups'): they came in the coup being dealt
    then, which only those frames can tell (docs/dealing-errors.md: a restart mid-coup
    loses frames where it came; a fault is flagged on its coup). Its
    ``device.status`` was sent; what it does to the game waits among them
    (``DeviceSeen``, applied by ``on_seen`` when they are dealt on) and it
    returns True. Before a held RESULT (or with the automatic boundary,
    where nothing held tells where the coup ended) it is the holding
    coup's own, applied at once."""
    s = eng.shoe
    cur = s.current if s is not None else None
    if cur is None or not cur.held or not eng.button:
        return False
    if not any(isinstance(x, (Button, DeviceResult)) for x in cur.held):
        return False
    if isinstance(f, Status):
        fault = f.code in FAULT_CODES
        waits = any(isinstance(x, DeviceSeen) and isinstance(x.frame, Status) for x in cur.held)
        if not (fault or (f.code == "OK" and waits)):
            return False
    cur.held.append(seen or DeviceSeen(f.t, f.seq, f))
    return True


def past_behind(eng: Engine, f: Status) -> bool:
    """A fault, or the OK after a fault that waits, come while cards wait
    past the live coup's complete tableau with no RESULT yet
    (``boundary.past_tableau``): whether it came in that coup (the cards
    are its extra cards) or in the next (they are the next coup's first
    cards, its RESULT never pressed) only the next RESULT or a fourth card
    tells. Its ``device.status`` was sent; what it does to the game waits
    with the cards (a ``DeviceSeen``, applied by ``on_seen`` where they are
    placed) and it returns True. (Flagged at once on the coup in play it
    would flag the coup before the one it came in.)"""
    s = eng.shoe
    cur = s.current if s is not None else None
    if cur is None or not cur.past or not eng.button or f.card_unread:
        return False
    if f.code not in FAULT_CODES:
        waits = any(isinstance(x, DeviceSeen) for x in cur.past)
        if not (f.code == "OK" and waits):
            return False
    cur.past.append(DeviceSeen(f.t, f.seq, f))
    return True


def on_seen(eng: Engine, f: DeviceSeen) -> Work:
    """A HELLO or a fault that came while frames were held, reached where
    it came once the frames before it are dealt on: what it does to the
    game applies now, to the coup in play (its ``device.status`` was sent
    when it came). Frames held again before it (another coup's misdeal)
    hold it again, in its place."""
    d = f.frame
    if held_behind(eng, d, f):
        return
    if isinstance(d, Hello):
        s = eng.shoe
        if s is not None and s.after_premature is not None:
            # (a loss on the line ends the wait for a second RESULT)
            yield from boundary.flush_after_premature(eng, s, d)
        cur = s.current if s is not None else None
        if s is not None and cur is not None and cur.past:
            # (and the wait for a RESULT past a complete tableau, as the
            # restart does arriving: ``Engine._past_then``)
            waiting, dealt = sum(isinstance(x, Card) for x in cur.past), s.comp.dealt
            yield from boundary.past_as_extras(eng, s, cur)
            loss.lose_past_numbering(eng, d, cur, waiting, dealt)
        restarted(eng, d)
        return
    yield from fault(eng, d, coup_in_play(eng))


def coup_in_play(eng: Engine) -> Coup | None:
    s = eng.shoe
    if s is None or s.current is None or not s.current.dealing or s.current.resolved:
        return None
    return s.current


def on_status(eng: Engine, f: Status) -> Work:
    code = f.code
    state = "fault" if code in FAULT_CODES or code == "LID_OPEN" else "online"
    payload = DeviceStatus(state=state, code=code, device=eng.device.copy())  # type: ignore[arg-type]
    if f.text:
        payload.detail = f.text
    eng._emit(f.t, payload)
    coup = coup_in_play(eng)
    if f.card_unread and eng.shoe is not None:
        # A shoe that reports an unread card only as an error (Angel Eye
        # sends no card message for it) still dealt that card: it takes
        # the next position, so the cards after it stay where they are
        # (the first card of a coup opens it).
        burning = eng.shoe
        if (
            burning.phase is BURN
            and burning.burn_left == 1
            and burning.current is None
            and burning.burn_unread is None
        ):
            # the last burn card called for, or coup 1's P1 if the burn was
            # one short: this device labels every card it reads, so the
            # next card's label tells (``shoe.after_burn_unread``)
            burning.burn_unread = Card(f.t, f.seq, None)
        else:
            work = dealing.on_card(eng, Card(f.t, f.seq, None))
            if work is not None:
                yield from work
        coup = coup_in_play(eng)
    if (code in FAULT_CODES or code == "OK") and (held_behind(eng, f) or past_behind(eng, f)):
        return
    yield from fault(eng, f, coup)
    if code == "EMPTY":
        s = eng.shoe
        if coup is not None and tableau.next_position(eng, coup) is not None:
            yield from article_x.void_misdeal(eng, f.t, coup, "SHOE_EXHAUSTED", "the shoe is empty mid-coup")
        elif s is not None and (s.phase is DEAL or s.phase is DEALING_OVER) and coup is None:
            yield from shoe.end_shoe(eng, f.t, reason="shoe empty")
    elif code == "LID_OPEN":
        eng._alert(f.t, "LID_OPEN", "the shoe's lid was opened", coup.number if coup else None)


def fault(eng: Engine, f: Status, coup: Coup | None) -> Work:
    """A fault status flags the coup in play (DEVICE_FAULT, awaiting the
    device's OK); OK clears a fault that waits for it."""
    code = f.code
    if code in FAULT_CODES:
        if coup is not None:
            eng._fault_coup = coup.number
            eng._fault_waiting = "ok"
            article_x.open_device_wait(eng, f.t, coup, "DEVICE_FAULT", f"device reports {code} mid-coup")
    elif code == "OK" and eng._fault_waiting == "ok":
        yield from device_back(eng, f.t)


def device_back(eng: Engine, t: float) -> Work:
    eng._fault_waiting = None
    s = eng.shoe
    n, eng._fault_coup = eng._fault_coup, None
    if s is None or n is None or n not in s.coups:
        return
    coup = s.coups[n]
    if "DEVICE_FAULT" in coup.open and coup.void_code is None:
        article_x.correct(eng, t, coup, "DEVICE_FAULT", "the device resumed with an unbroken sequence")
        yield from article_x.after_resolution(eng, coup, t)


def on_link(eng: Engine, f: Link) -> None:
    eng._emit(
        f.t,
        DeviceStatus(
            state="online" if f.up else "offline",
            code="CONNECTED" if f.up else "DISCONNECTED",
            device=eng.device.copy(),
            detail=f.detail if f.detail else UNSET,
        ),
    )
    if not f.up:
        coup = coup_in_play(eng)
        if coup is not None:
            eng._fault_coup = coup.number
            article_x.open_device_wait(eng, f.t, coup, "DEVICE_FAULT", "the device disconnected mid-coup")
        eng._fault_waiting = None
    elif eng._fault_coup is not None:
        eng._fault_waiting = "frame"
