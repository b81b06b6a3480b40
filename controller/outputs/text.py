"""Events as lines a person reads at a terminal: one line per coup (its
cards, totals, winner, and anything that went wrong), one per shoe event,
device change, misdeal and alert, one per supervisor's correction of a
settled coup (``coup.corrected``: the cards changed, the winner before and
after, the reason). ``card``, ``odds.update`` and ``roads`` events get no
line of their own (the coup's line has its cards).

Only for a terminal: anything read by a program gets the JSON lines
(docs/operations.md, Command line), which this never replaces in a pipe or a file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.textsafe import visible

#: How a person knows each tag (``rules.tags_of``) when the table has its bet.
TAG_NAMES = {
    "dragon7": "Dragon 7: Banker wins with three cards totalling 7",
    "panda8": "Panda 8: Player wins with three cards totalling 8",
    "banker7": "Banker wins with 7",
    "banker2": "Banker wins with 2",
}


def _hand(name: str, hand: Mapping[str, Any]) -> str:
    return f"{name} {' '.join(hand['cards'])} = {hand['total']}"


def _coup(n: Any) -> str:
    return f"coup {n:>3}" if isinstance(n, int) else "coup   -"


def _result(e: Mapping[str, Any]) -> str:
    winner = "tie" if e["winner"] == "tie" else f"{e['winner']} wins"
    notes = []
    if e.get("natural"):
        notes.append("natural")
    if e.get("player_pair"):
        notes.append("player pair")
    if e.get("banker_pair"):
        notes.append("banker pair")
    # a tag only where the table has the bet it settles (EZ Baccarat's
    # dragon7, panda8), named as players know it; elsewhere it is a fact for
    # programs (docs: Events), not news for the person watching
    bets = e.get("settlement") or {}
    notes.extend(TAG_NAMES.get(t, t) for t in e.get("tags") or [] if t in bets)
    if e.get("corrections"):
        notes.append("corrected: " + ", ".join(e["corrections"]))
    if e.get("demo"):
        notes.append("demo coup, not settled")
    tail = f"  ({'; '.join(notes)})" if notes else ""
    player, banker = _hand("Player", e["player"]), _hand("Banker", e["banker"])
    return f"{_coup(e['coup'])}  {player:<22} {banker:<22} {winner}{tail}"


def _winner(w: Any) -> str:
    return "tie" if w == "tie" else f"{w} wins"


def _corrected(e: Mapping[str, Any], was: str | None) -> str:
    """``coup.corrected``: which coup, each card replaced (was -> card at
    its position), the winner before (``was``: the superseded result's
    winner, None when it is not known) and after, the corrected hands, and
    the supervisor's reason and command id."""
    changes = ", ".join(
        f"{c.get('position')} {c.get('was') or '??'}->{c.get('card') or '??'}"
        for c in e.get("changes") or []
        if isinstance(c, Mapping)
    )
    before = _winner(was) if was is not None else "not known"
    player, banker = _hand("Player", e["player"]), _hand("Banker", e["banker"])
    by = f" ({e['command_id']})" if e.get("command_id") else ""
    return (
        f"{_coup(e['coup'])}  CORRECTED {changes}: was {before}, now {_winner(e['winner'])}"
        f" ({player}, {banker}); reason: {e.get('reason') or ''}{by}"
    )


def _cards(cards: Any) -> str:
    shown = [f"{c.get('position')} {c.get('card') or '??'}" for c in cards or [] if isinstance(c, Mapping)]
    return f" [{', '.join(shown)}]" if shown else ""


def render(e: Mapping[str, Any], was: str | None = None) -> str | None:
    """The line for an event, or None for events shown only through others:
    one line, every control character of its texts (a supervisor's reason,
    a device's) shown escaped (``textsafe.visible``). ``was``: for a
    ``coup.corrected``, the winner of the result it supersedes, if known
    (``Winners`` keeps them)."""
    line = _render(e, was)
    return None if line is None else visible(line)


class Winners:
    """The winner of each result rendered, by ``event_id``, so that a
    ``coup.corrected`` can say the winner it replaces (the event names
    the result it supersedes, not its winner). ``lookup`` finds one that
    was not rendered here (the output started after it: the journal's
    copy); None when it is gone. Forgotten at each new shoe (a correction
    applies to the shoe in play only), and bounded: at most ``MAX`` kept,
    the oldest dropped first."""

    MAX = 4096  # (a shoe has at most 156 coups; the rest are corrections)

    def __init__(self, lookup: Callable[[str], Mapping[str, Any] | None] | None = None) -> None:
        self._won: dict[str, str] = {}
        self._lookup = lookup

    def was(self, e: Mapping[str, Any]) -> str | None:
        """For a ``coup.corrected``: the superseded result's winner."""
        sup = e.get("supersedes")
        if not isinstance(sup, str):
            return None
        w = self._won.get(sup)
        if w is None and self._lookup is not None:
            old = self._lookup(sup)
            if old is not None and old.get("type") in ("coup.result", "coup.corrected"):
                w = old.get("winner") if isinstance(old.get("winner"), str) else None
        return w

    def seen(self, e: Mapping[str, Any]) -> None:
        kind = e.get("type")
        if kind == "shoe.started":
            self._won.clear()
        elif kind in ("coup.result", "coup.corrected") and isinstance(e.get("event_id"), str):
            if len(self._won) >= self.MAX:
                del self._won[next(iter(self._won))]
            self._won[e["event_id"]] = str(e.get("winner"))

    def render(self, e: Mapping[str, Any]) -> str | None:
        """``render`` with the winner a correction replaces."""
        line = render(e, self.was(e) if e.get("type") == "coup.corrected" else None)
        self.seen(e)
        return line


def _render(e: Mapping[str, Any], was: str | None = None) -> str | None:
    kind = e.get("type")
    if kind == "coup.result":
        return _result(e)
    if kind == "coup.corrected":
        return _corrected(e, was)
    if kind == "coup.void":
        return f"{_coup(e['coup'])}  VOID ({e['code']}): {e.get('detail') or ''}{_cards(e.get('cards'))}"
    if kind == "misdeal":
        action = str(e["action"]).replace("_", " ")
        until = f" until {str(e['deadline'])[11:19]} UTC" if e.get("deadline") else ""
        return f"{_coup(e.get('coup'))}  misdeal {e['code']}, {action}{until}: {e.get('detail') or ''}"
    if kind == "shoe.started":
        return f"--- shoe {e['shoe']} started: {e['decks']} decks, {e['profile']}"
    if kind == "shoe.burn":
        return f"--- burn: first card {e.get('first_card') or '??'}, {e['burned']} cards burned"
    if kind == "shoe.cut_card":
        return f"--- cut card: coup {e['last_coup']} is the last"
    if kind == "shoe.ended":
        t = e.get("tally") or {}
        why = f" ({e['reason']})" if e.get("reason") else ""
        return (
            f"--- shoe {e['shoe']} ended{why}: {e['coups']} coups, "
            f"player {t.get('player', 0)}, banker {t.get('banker', 0)}, tie {t.get('tie', 0)}"
        )
    if kind == "device.status":
        dev = e.get("device") or {}
        what = " ".join(str(dev[k]) for k in ("model", "firmware") if dev.get(k))
        detail = f": {e['detail']}" if e.get("detail") else ""
        return f"device {e['state']} ({e.get('code')}){' ' + what if what else ''}{detail}"
    if kind == "security.alert":
        return f"ALERT {e['code']}: {e.get('detail') or ''}"
    return None
