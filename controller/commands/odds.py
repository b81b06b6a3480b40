"""``shoe-controller odds [--decks N] [--profile P] [--remove CARDS] [--json]``
(docs/operations.md, Command line): exact probabilities and house edge of every bet of a
profile, for a fresh shoe or after removing cards.

The human table shows percentages; ``--json`` prints::

    {"decks", "profile", "cards_left",
     "outcomes": {"player", "banker", "tie"}, "incomplete",
     "bets": {name: {"win", "push", "lose", "ev", "house_edge"}},
     "exact": {"outcomes": {...}, "bets": {...}}}

with floats, and under ``"exact"`` the same numbers as fraction strings
(``"1146126283218944/2499199137751680"``, ``"0"``). ``incomplete`` is the
chance that the coup cannot be completed because the shoe runs out (only
with 4 or 5 cards left; 0 otherwise). A card that is not a card, more
copies removed than the shoe holds, or fewer than 4 cards left (no coup
can be dealt) is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from typing import Any

from controller.cards import CardError
from controller.errors import UsageError
from controller.odds import OddsResult, from_profile, odds_for, rank_counts
from controller.rules import load_profile
from controller.textsafe import visible_lines

_BET_FIELDS = ("win", "push", "lose", "ev", "house_edge")
#: The fewest cards a coup can use (two for each hand); with fewer left no
#: coup can be dealt at all.
MIN_COUP_CARDS = 4


def _removed(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _numbers(result: OddsResult[Fraction], conv: Any) -> dict[str, Any]:
    return {
        "outcomes": {who: conv(p) for who, p in result.outcomes.items()},
        "bets": {name: {f: conv(getattr(b, f)) for f in _BET_FIELDS} for name, b in result.bets.items()},
    }


def report(decks: int, profile_name: str, remove: str) -> dict[str, Any]:
    """The ``--json`` document."""
    if not 1 <= decks <= 12:
        raise UsageError(f"--decks must be 1..12, not {decks}")
    profile = load_profile(profile_name)  # ConfigError (exit 2) names the problem
    try:
        counts = rank_counts(decks, _removed(remove))
    except CardError as exc:
        raise UsageError(f"--remove: {exc}") from None
    left = sum(counts)
    if left < MIN_COUP_CARDS:
        raise UsageError(
            f"--remove leaves {left} card{'s' if left != 1 else ''}: every coup needs at least "
            f"{MIN_COUP_CARDS} (two for each hand), so no bet can be settled"
        )
    bets, tableau = from_profile(profile)
    result = odds_for(counts, bets, tableau, exact=True)
    floats = _numbers(result, float)
    # With fewer than six cards left the coups that need a fifth or sixth
    # card cannot complete: they have no winner, and every bet's
    # win + push + lose falls short of 1 by exactly this.
    incomplete = 1 - sum(result.outcomes.values(), Fraction(0))
    exact = _numbers(result, str)
    exact["incomplete"] = str(incomplete)
    return {
        "decks": decks,
        "profile": profile.name,
        "cards_left": result.cards_left,
        "outcomes": floats["outcomes"],
        "incomplete": float(incomplete),
        "bets": floats["bets"],
        "exact": exact,
    }


def _pct(x: float) -> str:
    return f"{x * 100:.4f}%"


def render(doc: dict[str, Any], title: str, removed: list[str]) -> str:
    lines = [f"{title}: {doc['decks']} deck(s), {doc['cards_left']} cards left"]
    if removed:
        lines[0] += f" (removed {','.join(removed)})"
    lines.append("")
    lines.append(f"{'outcome':<14}{'probability':>12}")
    for who, p in doc["outcomes"].items():
        lines.append(f"{who:<14}{_pct(p):>12}")
    if doc["incomplete"]:
        lines.append(f"{'cannot finish':<14}{_pct(doc['incomplete']):>12}")
        lines.append("")
        lines.append(
            f"With {doc['cards_left']} cards left, a coup that needs a "
            f"{'fifth' if doc['cards_left'] == 4 else 'sixth'} card cannot be completed "
            f"({_pct(doc['incomplete'])} of deals): it settles no bet, so each bet's "
            "win + push + lose falls short of 100% by that much."
        )
    lines.append("")
    lines.append(f"{'bet':<14}{'win':>12}{'push':>12}{'lose':>12}{'EV per unit':>14}{'house edge':>12}")
    for name, b in doc["bets"].items():
        lines.append(
            f"{name:<14}{_pct(b['win']):>12}{_pct(b['push']):>12}{_pct(b['lose']):>12}"
            f"{b['ev']:>+14.6f}{_pct(b['house_edge']):>12}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    doc = report(args.decks, args.profile, args.remove)
    if args.json:
        json.dump(doc, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        title = load_profile(args.profile).title
        print(visible_lines(render(doc, title, [r.upper() for r in _removed(args.remove)])))
    return 0
