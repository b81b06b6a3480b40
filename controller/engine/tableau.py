"""The third-card tableau: which position the next card of a coup takes.

Pure functions of a coup's cards and the profile's tableau: the next
position (None when complete, ``UNKNOWN`` when an unread card decides it),
whether cards make one exact tableau, whether unread cards complete it, and
the fewest cards a coup still needs.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from controller.cards import CARD_VALUE
from controller.engine.state import ORDER, UNKNOWN, Coup

if TYPE_CHECKING:
    from controller.engine.facade import Engine


def next_position(eng: Engine, coup: Coup) -> str | None:
    """The tableau's next position, None when complete, UNKNOWN when an
    unread card decides it."""
    n = len(coup.cards)
    if n < 4:
        return ORDER[n]
    c = coup.cards
    if c[0] is None or c[1] is None or c[2] is None or c[3] is None:
        return UNKNOWN
    p = (CARD_VALUE[c[0]] + CARD_VALUE[c[2]]) % 10
    b = (CARD_VALUE[c[1]] + CARD_VALUE[c[3]]) % 10
    tab = eng.tab
    if tab.natural[p] or tab.natural[b]:
        return None
    if tab.player_draws[p]:
        if n == 4:
            return "P3"
        p3 = c[4]
        if p3 is None:
            return UNKNOWN
        if tab.banker_draws[b][CARD_VALUE[p3]]:
            return "B3" if n == 5 else None
        return None
    if tab.banker_draws_stood[b]:
        return "B3" if n == 4 else None
    return None


def tableau_exact(eng: Engine, cards: list[str | None]) -> bool:
    """Whether these cards, dealt in order, make one complete tableau with
    none left over (an unread card: not known, so no)."""
    trial = Coup(number=0, demo=False, t_start=0.0)
    for c in cards:
        pos = next_position(eng, trial)
        if pos is None or pos == UNKNOWN or c is None:
            return False
        trial.positions.append(pos)
        trial.cards.append(c)
    return next_position(eng, trial) is None


def complete_whatever_unread(eng: Engine, coup: Coup, *, some: bool = False) -> bool:
    """True if the tableau is complete for every value of the coup's
    unread cards (``some``: for at least one); at most two are tried
    (100 cases), more are never complete for every value and may be for
    some."""
    holes = [i for i, c in enumerate(coup.cards) if c is None]
    if len(holes) > 2:
        return some
    stand_in = "TA23456789"  # a card of each point value 0..9
    saved = list(coup.cards)
    try:
        for values in itertools.product(range(10), repeat=len(holes)):
            for i, v in zip(holes, values, strict=True):
                coup.cards[i] = stand_in[v] + "S"
            if (next_position(eng, coup) is None) == some:
                return some
        return not some
    finally:
        coup.cards[:] = saved


def need(eng: Engine, coup: Coup) -> int:
    """The fewest cards the coup still needs to complete its tableau."""
    nxt = next_position(eng, coup)
    if nxt is None:
        return 0
    if nxt == UNKNOWN:
        # the fewest: complete if the unread card(s) can make it so
        return 0 if complete_whatever_unread(eng, coup, some=True) else 1
    return max(1, 4 - len(coup.cards))
