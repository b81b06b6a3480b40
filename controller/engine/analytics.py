"""The analytics of a coup: odds for the next coup, ADVANTAGE alerts, roads.

Owns ``odds.update`` (two views: the cards truly left and what a counter can
know), the ADVANTAGE alerts when a bet's expectation crosses the threshold,
and the ``roads`` event; and the work on them done ahead, while the daemon
is idle (``prepare``), so that a coup's RESULT does not wait for it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NamedTuple

from controller import roads
from controller.engine import boundary, tableau
from controller.engine.machine import DEALING_OVER, ENDED
from controller.event_types import OddsUpdate, RoadsEvent

if TYPE_CHECKING:
    from controller.engine.facade import Engine
    from controller.engine.state import Coup


#: no odds once the dealing is over (the last permitted coup dealt) or the shoe ended
_NO_ODDS = frozenset((DEALING_OVER, ENDED))


def publish_odds(eng: Engine, t: float) -> None:
    """Exact odds of every bet for the next coup, in two views: the
    cards truly left (``shoe``) and what a counter can know (``counter``:
    the face-down burned cards still unknown); plus ADVANTAGE alerts when
    a bet's counter-view expectation crosses the threshold."""
    s = eng.shoe
    if eng._calc is None or s is None or s.phase in _NO_ODDS or eng._odds_quiet:
        return
    if s.last_coup is not None and s.next_coup > s.last_coup:
        return
    shoe_counts = s.comp.rank_counts()
    counter_counts = dict(shoe_counts)
    for card in s.burned_cards:
        counter_counts[card[0]] += 1
    eng._later(
        functools.partial(emit_odds, eng, t, s.next_coup, s.comp.cards_left, shoe_counts, counter_counts)
    )


class RoadsAhead(NamedTuple):
    """Roads computed ahead: of ``results`` (copies of ``Shoe.results``'
    entries, and the one guessed for the coup), for the coup ``dealt``
    (its number and cards)."""

    results: list[dict[str, Any]]
    roads: roads.Roads
    dealt: tuple[Any, ...]


def prepare(eng: Engine) -> bool:
    """Idle-time work, a step per call (a caller with nothing else to do,
    the daemon between two reads): the roads, then the odds, that the coup
    being dealt will publish when it settles (``prepare_roads``,
    ``prepare_odds``). True if it did a step (call again)."""
    return prepare_roads(eng) or prepare_odds(eng)


def _dealt(eng: Engine) -> Coup | None:
    """The coup being dealt, if it is complete by the tableau and settles
    next (the state ``publish_odds`` and ``emit_roads`` will be called in)."""
    s = eng.shoe
    if s is None:
        return None
    coup = s.current
    if coup is None or not coup.dealing or coup.void_code is not None or coup.open:
        return None
    if tableau.next_position(eng, coup) is not None:
        return None  # a card is still due
    return coup


def prepare_roads(eng: Engine) -> bool:
    """The ``roads`` the coup being dealt will publish when it settles,
    computed ahead (for the results so far and the one its hands give,
    ``boundary.result_ahead``) and kept in ``Engine._roads_ahead``:
    ``emit_roads`` uses them only if the results are then exactly those
    (the roads are a function of the results alone), and computes them
    otherwise. True if it computed them. Changes no state of the game."""
    s = eng.shoe
    if not eng.roads or s is None:
        return False
    coup = _dealt(eng)
    if coup is None or coup.demo:
        return False
    dealt = (coup.number, *coup.cards)
    ahead = eng._roads_ahead
    if ahead is not None and ahead.dealt == dealt:
        return False  # prepared already (the results are checked when used)
    guess = boundary.result_ahead(eng, coup)
    if guess is None:
        return False
    winner, ppair, bpair = guess
    results = [dict(r) for r in s.results]
    results.append({"winner": winner, "player_pair": ppair, "banker_pair": bpair})
    eng._roads_ahead = RoadsAhead(results, roads.build_roads(results), dealt)
    return True


def prepare_odds(eng: Engine) -> bool:
    """Idle-time work, for a caller with nothing else to do (the daemon
    between two reads): when the coup being dealt is complete by the
    tableau, the odds ``publish_odds`` will ask for when it settles, for the
    composition left now, are computed ahead into the calculator
    (``OddsCalculator.prepare``), one view per call. The coup's RESULT, and
    the next coup's first card that arrives right behind it, then wait for
    no odds: the events are the same (the same exact function of the same
    counts), only computed earlier. True if it computed something (call
    again); False when there is nothing (more) to prepare. Changes no
    state of the game."""
    s = eng.shoe
    calc = eng._calc
    if calc is None or s is None or s.phase in _NO_ODDS or eng._odds_quiet:
        return False
    if s.last_coup is not None and s.next_coup > s.last_coup:
        return False
    if _dealt(eng) is None:
        return False  # nothing dealt to settle, or a card is still due: the composition will change
    shoe_counts = s.comp.rank_counts()
    if calc.prepare(shoe_counts):
        return True
    if s.burned_cards:
        counter_counts = dict(shoe_counts)
        for card in s.burned_cards:
            counter_counts[card[0]] += 1
        return bool(calc.prepare(counter_counts))
    return False


def queued(eng: Engine) -> bool:
    """Whether the last ``feed``, ``tick`` or ``command`` left analytics for
    ``drain_analytics`` (with ``defer_analytics``)."""
    return bool(eng._deferred)


def emit_odds(
    eng: Engine,
    t: float,
    coup_no: int,
    cards_left: int,
    shoe_counts: dict[str, int],
    counter_counts: dict[str, int],
) -> None:
    for view, counts in (("shoe", shoe_counts), ("counter", counter_counts)):
        res = eng._calc.compute(counts)
        bets = {
            name: {
                "win": round(b.win, 12),
                "push": round(b.push, 12),
                "lose": round(b.lose, 12),
                "ev": round(b.ev, 12),
            }
            for name, b in res.bets.items()
        }
        eng._emit(
            t,
            OddsUpdate(coup=coup_no, cards_left=cards_left, view=view, bets=bets),  # type: ignore[arg-type]
        )
        if view == "counter":
            check_advantage(eng, t, coup_no, bets)


def emit_roads(eng: Engine, t: float, results: list[dict[str, Any]], n: int) -> None:
    """The scoreboard roads of a shoe's first ``n`` settled coups: those
    computed ahead (``prepare_roads``) if they are of these results."""
    ahead, eng._roads_ahead = eng._roads_ahead, None
    if ahead is not None and ahead.results == results[:n]:
        made = ahead.roads
    else:
        made = roads.build_roads(results[:n])
    eng._emit(t, RoadsEvent(**made))


def check_advantage(eng: Engine, t: float, coup_no: int, bets: dict[str, dict[str, float]]) -> None:
    for name, b in bets.items():
        above = b["ev"] > eng.advantage_threshold
        if above and name not in eng._advantage:
            eng._advantage.add(name)
            eng._alert(
                t,
                "ADVANTAGE",
                f"{name}: a counter's expectation for coup {coup_no} is {b['ev']:+.5f} per unit, "
                f"above {eng.advantage_threshold:+g}",
                coup_no,
            )
        elif not above and name in eng._advantage:
            eng._advantage.discard(name)
            eng._alert(
                t,
                "ADVANTAGE",
                f"{name}: back to {b['ev']:+.5f} per unit for coup {coup_no}, "
                f"at or below {eng.advantage_threshold:+g}",
                coup_no,
            )
