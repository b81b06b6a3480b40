"""Cards, point values and the shoe's composition.

A card is its two-character code: rank ``A23456789TJQK`` then suit
``SHDC``. Codes are plain strings so the hot path (replay at hundreds of
thousands of cards a second) does no object construction per card.
"""

from __future__ import annotations

RANKS = "A23456789TJQK"
SUITS = "SHDC"
ALL_CARDS: tuple[str, ...] = tuple(r + s for s in SUITS for r in RANKS)

#: Point value of each rank: A=1, 2..9 face value, T/J/Q/K = 0.
RANK_VALUE: dict[str, int] = {r: (i + 1 if i < 9 else 0) for i, r in enumerate(RANKS)}
#: Burn count of each rank for the first-card burn rule: 10 and faces count 10.
RANK_BURN: dict[str, int] = {r: i + 1 if i < 9 else 10 for i, r in enumerate(RANKS)}

CARD_VALUE: dict[str, int] = {c: RANK_VALUE[c[0]] for c in ALL_CARDS}


class CardError(ValueError):
    """A string that is not a card code."""


def parse_card(text: str) -> str:
    """Normalise and validate a card code (``"td"`` -> ``"TD"``; ``"10D"``
    is accepted for ``"TD"``)."""
    code = text.strip().upper()
    if len(code) == 3 and code.startswith("10"):
        code = "T" + code[2]
    if code not in CARD_VALUE:
        raise CardError(f"not a card: {text!r} (expected rank A23456789TJQK + suit SHDC, e.g. 'TD')")
    return code


def value(card: str) -> int:
    """Baccarat point value of a card code."""
    return CARD_VALUE[card]


def rank(card: str) -> str:
    return card[0]


def hand_total(cards: list[str]) -> int:
    return sum(CARD_VALUE[c] for c in cards) % 10


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
