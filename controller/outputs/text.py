"""Events as lines a person reads at a terminal: one line per coup (its
cards, totals, winner, and anything that went wrong), one per shoe event,
device change, misdeal and alert. ``card``, ``odds.update`` and ``roads``
events get no line of their own (the coup's line has its cards).

Only for a terminal: anything read by a program gets the JSON lines
(SPEC section 6), which this never replaces in a pipe or a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.textsafe import visible


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
    notes.extend(e.get("tags") or [])
    if e.get("corrections"):
        notes.append("corrected: " + ", ".join(e["corrections"]))
    if e.get("demo"):
        notes.append("demo coup, not settled")
    tail = f"  ({'; '.join(notes)})" if notes else ""
    player, banker = _hand("Player", e["player"]), _hand("Banker", e["banker"])
    return f"{_coup(e['coup'])}  {player:<22} {banker:<22} {winner}{tail}"


def _cards(cards: Any) -> str:
    shown = [f"{c.get('position')} {c.get('card') or '??'}" for c in cards or [] if isinstance(c, Mapping)]
    return f" [{', '.join(shown)}]" if shown else ""


def render(e: Mapping[str, Any]) -> str | None:
    """The line for an event, or None for events shown only through others:
    one line, every control character of its texts (a supervisor's reason,
    a device's) shown escaped (``textsafe.visible``)."""
    line = _render(e)
    return None if line is None else visible(line)


def _render(e: Mapping[str, Any]) -> str | None:
    kind = e.get("type")
    if kind == "coup.result":
        return _result(e)
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
