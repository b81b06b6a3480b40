"""Card codes: the vocabulary every codec and the engine share.

A card is its two-character code: rank ``A23456789TJQK`` then suit
``SHDC``. Codes are plain strings so the hot path (replay at hundreds of
thousands of cards a second) does no object construction per card.

This module is the bottom layer: it imports nothing of the project, so the
codecs (``firmware_protocols``) and the game (``controller``) both build on
it. What a card is worth in baccarat, and how many are left in a shoe, is
the game's: see ``controller.cards``.
"""

from __future__ import annotations

RANKS = "A23456789TJQK"
SUITS = "SHDC"
ALL_CARDS: tuple[str, ...] = tuple(r + s for s in SUITS for r in RANKS)
_CARD_SET = frozenset(ALL_CARDS)


class CardError(ValueError):
    """A string that is not a card code."""


def parse_card(text: str) -> str:
    """Normalise and validate a card code (``"td"`` -> ``"TD"``; ``"10D"``
    is accepted for ``"TD"``)."""
    code = text.strip().upper()
    if len(code) == 3 and code.startswith("10"):
        code = "T" + code[2]
    if code not in _CARD_SET:
        raise CardError(f"not a card: {text!r} (expected rank A23456789TJQK + suit SHDC, e.g. 'TD')")
    return code
