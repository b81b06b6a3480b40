"""The fast path: the two frames that make most of a shoe, when nothing is
out of the ordinary, applied without the general machinery.

Owns ``card`` (a plain readable card into a clean live coup, or opening the
next coup) and ``result`` (the dealer's RESULT on a clean coup whose
tableau is complete). Each first checks, without changing anything, that
the frame is the common case; if not it returns False and ``Engine.feed``
takes the general path (``dealing.on_card``, ``boundary.on_button``). When
it applies, it does exactly what the general path would do, event for
event (``tests/test_engine_fast_path.py`` replays the capture corpus both
ways): the deadlines to expire, the device to wait for, the after-premature
cards, the shoe's announcement and the held frames are all absent by the
guard, so the general path would skip them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from controller.cards import CARD_VALUE
from controller.engine import boundary, machine, shoe, tableau
from controller.engine.machine import DEAL, DEALING, LIVE
from controller.engine.state import ORDER, UNKNOWN, Coup, Work
from controller.events import SCHEMA_VERSION, format_ts
from firmware_protocols.frames import Button, Card

if TYPE_CHECKING:
    from controller.engine.facade import Engine

#: ``Engine.feed`` takes the fast path only while this is True (tests turn
#: it off to compare both paths on the same inputs).
ENABLED = True


def card(eng: Engine, f: Card) -> Work | Literal[False] | None:
    """A card, readable, in the game, of this shoe's decks, placed where the
    tableau puts it (or on no hand), into the live coup or opening the
    next one, in a shoe dealing with nothing open, held or awaited: dealt,
    and what is left to do (the coup's end, with the automatic boundary;
    the shoe run out), as ``dealing.on_card`` would return it. Anything
    else: False, nothing changed."""
    s = eng.shoe
    if (
        s is None
        or s.phase != DEAL  # (the burn, an ended shoe's overrun: general)
        or s.after_premature is not None
        or not s.announced
        or eng._fault_waiting is not None
    ):
        return False
    code = f.card
    if code is None or not f.game:
        return False
    deck = f.deck
    if deck is not None and not 1 <= deck <= eng.decks:
        return False
    coups = s.coups
    coup = s.current
    if coup is None or coup.state not in LIVE:
        # opens the next coup: nothing still open (a closed coup awaiting
        # a supervisor is in ``coups``), no numbering to restore or lost,
        # not past the last permitted coup, no more burned than called
        if (
            coups
            or (coup is not None and coup.held is not None)
            or s.renumber_to is not None
            or s.numbering_lost is not None
            or (s.coups_count == 0 and shoe.burned_past_call(eng, s))  # (BURN_MISMATCH first)
        ):
            return False
        n = s.next_coup
        if s.last_coup is not None and n > s.last_coup:
            return False
        pos: str | None = "P1"
        coup = None
    else:
        # live and clean (nothing void, held, early or open): ``dealing``
        if coup.state is not DEALING or len(coups) != 1 or coups.get(coup.number) is not coup:
            return False
        k = len(coup.cards)
        pos = ORDER[k] if k < 4 else tableau.next_position(eng, coup)
        if pos is None or pos == UNKNOWN:
            return False  # an extra card
    hand = f.hand
    if hand is not None and hand != pos:
        return False
    comp = s.comp
    dealt = comp.dealt
    capacity = comp.decks * 52
    remaining = comp.remaining
    left = remaining.get(code, 0)
    if dealt >= capacity or left <= 0:
        return False  # FOREIGN_CARD (or not a card code: the general path says)
    order = s.order
    if order and dealt < len(order) and order[dealt] != code:
        return False  # SHUFFLE_MISMATCH
    # -- the common case: from here on nothing returns False
    t = f.t
    if coup is None:
        # (dealing.open_coup, its checks passed above)
        s.next_coup = n + 1
        s.coups_count += 1
        coup = Coup(number=n, demo=n <= int(eng.rules["demo_coups"]), t_start=t)
        machine.move(coup, DEALING)
        coup.dealt_at_open = dealt
        coups[n] = coup
        s.current = coup
    # (dealing.take)
    remaining[code] = left - 1
    comp.dealt = dealt + 1
    # (dealing.deal)
    cards = coup.cards
    coup.positions.append(pos)  # type: ignore[arg-type]
    cards.append(code)
    # (Engine._emit_card, inline: its call is a tenth of a card's time)
    eng.seq = seq = eng.seq + 1
    sid = s.id
    table = eng.table
    eng._out.append(
        {
            "v": SCHEMA_VERSION,
            "type": "card",
            "event_id": f"{table}/{sid or '-'}/{seq}",
            "table": table,
            "shoe": sid,
            "seq": seq,
            "ts": format_ts(t),
            "coup": coup.number,
            "position": pos,
            "card": code,
            "value": CARD_VALUE[code],
            "face_up": f.face_up,
        }
    )
    # (boundary.after_card: with the RESULT button a complete tableau waits
    # for the dealer's RESULT, so only the shoe's last card has more to do)
    if eng.button:
        return boundary.after_card(eng, s, coup, f) if dealt + 1 >= capacity else None
    k = len(cards)
    nxt = ORDER[k] if k < 4 else tableau.next_position(eng, coup)
    if nxt is None:
        return boundary.close_dealing(eng, coup, t)
    if dealt + 1 >= capacity:
        return boundary.after_card(eng, s, coup, f)  # SHOE_EXHAUSTED
    return None


def result(eng: Engine, f: Button) -> Work | Literal[False] | None:
    """The dealer's RESULT (with the RESULT button) on the live coup, clean
    (nothing open, held, void or early) and complete: the work that closes
    and settles it, as ``boundary.on_button`` would do. Anything else:
    False, nothing changed."""
    s = eng.shoe
    if (
        s is None
        or not eng.button
        or f.name != "RESULT"
        or s.phase != DEAL
        or s.after_premature is not None
        or s.past_read is not None  # (the coup may have begun with them: boundary._early_fits)
        or eng._fault_waiting is not None
    ):
        return False
    coup = s.current
    coups = s.coups
    if (
        coup is None
        or coup.state is not DEALING  # (live and clean: nothing void, held, early or open)
        or coup.past  # (cards wait past its tableau: placed first, boundary.result)
        or len(coups) != 1
        or coups.get(coup.number) is not coup
        or tableau.next_position(eng, coup) is not None
    ):
        return False
    if coup.carry or coup.device_result is not None or s.last_coup is not None:
        return boundary.close_dealing(eng, coup, f.t)
    # (boundary.close_dealing, with nothing to carry, no device result to
    # compare and no last coup: the coup settles and the shoe goes on)
    machine.close(coup)
    s.current = None
    boundary.settle_now(eng, coup, f.t)  # (no device result: nothing left to do)
    if coup.resolved:
        coups.pop(coup.number, None)
    return None
