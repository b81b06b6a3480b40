"""Point values and the shoe's composition: what cards mean to the game.

The card codes themselves (ranks, suits, :func:`parse_card`) are the bottom
layer, ``firmware_protocols.cards``, shared with the codecs; they are
re-exported here so the game's modules have one place to import cards from.
"""

from __future__ import annotations

from firmware_protocols.cards import ALL_CARDS, RANKS, CardError, parse_card

__all__ = [
    "ALL_CARDS",
    "CARD_VALUE",
    "RANKS",
    "RANK_BURN",
    "RANK_VALUE",
    "CardError",
    "ShoeComposition",
    "parse_card",
]

#: Point value of each rank: A=1, 2..9 face value, T/J/Q/K = 0.
RANK_VALUE: dict[str, int] = {r: (i + 1 if i < 9 else 0) for i, r in enumerate(RANKS)}
#: Burn count of each rank for the first-card burn rule: 10 and faces count 10.
RANK_BURN: dict[str, int] = {r: i + 1 if i < 9 else 10 for i, r in enumerate(RANKS)}

CARD_VALUE: dict[str, int] = {c: RANK_VALUE[c[0]] for c in ALL_CARDS}


class ShoeComposition:
    """How many copies of each card remain in a shoe of ``decks`` decks."""

    __slots__ = ("dealt", "decks", "remaining")

    def __init__(self, decks: int) -> None:
        self.decks = decks
        self.remaining: dict[str, int] = dict.fromkeys(ALL_CARDS, decks)
        self.dealt = 0

    @property
    def capacity(self) -> int:
        return self.decks * 52

    @property
    def cards_left(self) -> int:
        return self.capacity - self.dealt

    def take(self, card: str | None) -> bool:
        """Remove a card; returns False if no copy was left (a foreign card,
        which is none of the shoe's own and so does not count as dealt from
        it), or if every card of the shoe was dealt already. An unread card
        (``None``) only counts towards cards dealt."""
        if self.dealt >= self.capacity:
            # no card can leave a shoe whose every card has (an unread card
            # takes no copy, so this is what bounds a stream of them)
            return False
        if card is None:
            self.dealt += 1
            return True
        left = self.remaining[card]
        if left <= 0:
            return False
        self.remaining[card] = left - 1
        self.dealt += 1
        return True

    def rank_counts(self) -> dict[str, int]:
        """Remaining cards per rank (suits merged), for the odds."""
        out = dict.fromkeys(RANKS, 0)
        for c, n in self.remaining.items():
            out[c[0]] += n
        return out
