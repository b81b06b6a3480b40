"""controller.odds against an independent brute-force enumerator and
published figures.

The brute force here shares no code with controller.odds: it deals card
values one at a time (P1, B1, P2, B2, then third cards) following the
tableau as docs/dealing-errors.md writes it, with the exact weight of each draw (copies
left of that value), and for pairs it walks ranks. It is slow (about a
second per composition), so it runs on 1- and 2-deck shoes and a few
depleted or lopsided compositions; the 8-deck shoe is checked against
published exact combination counts.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest

from controller.cards import RANKS, CardError
from controller.odds import (
    STANDARD_TABLEAU,
    BetTable,
    Condition,
    OddsCalculator,
    Tableau,
    from_profile,
    odds_for,
    rank_counts,
    value_counts,
)
from controller.rules import load_profile

PROFILES = ("punto_banco", "ez_baccarat", "baccarat_27")

# --- the independent brute force ------------------------------------------------------


def std_player_draws(p: int) -> bool:
    return p <= 5


def std_banker_draws(b: int, p3: int | None) -> bool:
    """docs/dealing-errors.md: Banker's action; ``p3`` None when the Player stood."""
    if p3 is None:
        return b <= 5
    return (
        b <= 2
        or (b == 3 and p3 != 8)
        or (b == 4 and 2 <= p3 <= 7)
        or (b == 5 and 4 <= p3 <= 7)
        or (b == 6 and p3 in (6, 7))
    )


Cls = tuple[int, int, int, int, bool]  # player total, banker total, player cards, banker cards, natural


def _settle(
    seq: Sequence[int], player_draws: Callable[[int], bool], banker_draws: Callable[[int, int | None], bool]
) -> Cls | None:
    """The coup's class once ``seq`` (values in dealing order) completes it."""
    if len(seq) < 4:
        return None
    p = (seq[0] + seq[2]) % 10
    b = (seq[1] + seq[3]) % 10
    if p >= 8 or b >= 8:
        return (p, b, 2, 2, True)
    if player_draws(p):
        if len(seq) == 4:
            return None
        p3 = seq[4]
        if banker_draws(b, p3):
            if len(seq) == 5:
                return None
            return ((p + p3) % 10, (b + seq[5]) % 10, 3, 3, False)
        return ((p + p3) % 10, b, 3, 2, False)
    if banker_draws(b, None):
        if len(seq) == 4:
            return None
        return (p, (b + seq[4]) % 10, 2, 3, False)
    return (p, b, 2, 2, False)


def brute_force(
    values: Sequence[int],
    player_draws: Callable[[int], bool] = std_player_draws,
    banker_draws: Callable[[int, int | None], bool] = std_banker_draws,
) -> dict[Cls, Fraction]:
    """P(class) for a shoe with ``values[v]`` cards of value v. A coup the
    shoe cannot complete counts for nothing."""
    left = list(values)
    total = sum(left)
    ways: dict[tuple[Cls, int], int] = defaultdict(int)
    seq: list[int] = []

    def deal(weight: int) -> None:
        cls = _settle(seq, player_draws, banker_draws)
        if cls is not None:
            ways[cls, len(seq)] += weight
            return
        for v in range(10):
            k = left[v]
            if k:
                left[v] = k - 1
                seq.append(v)
                deal(weight * k)
                seq.pop()
                left[v] = k

    deal(1)
    out: dict[Cls, Fraction] = defaultdict(Fraction)
    for (cls, n), w in ways.items():
        den = 1
        for i in range(n):
            den *= total - i
        out[cls] += Fraction(w, den)
    return out


def brute_force_ranks(counts: Sequence[int]) -> dict[tuple[Cls, bool, bool], Fraction]:
    """P(class, player pair, banker pair), dealing ranks (small shoes only).
    Player's first two cards are cards 1 and 3, Banker's cards 2 and 4."""
    left = list(counts)
    total = sum(left)
    value = [(i + 1) % 10 if i < 9 else 0 for i in range(13)]
    ways: dict[tuple[Cls, bool, bool, int], int] = defaultdict(int)
    seq: list[int] = []

    def deal(weight: int) -> None:
        cls = _settle([value[r] for r in seq], std_player_draws, std_banker_draws)
        if cls is not None:
            ways[cls, seq[0] == seq[2], seq[1] == seq[3], len(seq)] += weight
            return
        for r in range(13):
            k = left[r]
            if k:
                left[r] = k - 1
                seq.append(r)
                deal(weight * k)
                seq.pop()
                left[r] = k

    deal(1)
    out: dict[tuple[Cls, bool, bool], Fraction] = defaultdict(Fraction)
    for (cls, pp, bp, n), w in ways.items():
        den = 1
        for i in range(n):
            den *= total - i
        out[cls, pp, bp] += Fraction(w, den)
    return out


def facts(cls: Cls, pp: bool = False, bp: bool = False) -> dict[str, Any]:
    pt, bt, pc, bc, natural = cls
    return {
        "winner": "player" if pt > bt else "banker" if bt > pt else "tie",
        "player_total": pt,
        "banker_total": bt,
        "player_cards": pc,
        "banker_cards": bc,
        "natural": natural,
        "player_pair": pp,
        "banker_pair": bp,
    }


def settle_bet(rules: Sequence[tuple[Condition, Fraction]], f: Mapping[str, Any]) -> Fraction:
    """First matching rule, written out independently of controller.odds."""
    for cond, pays in rules:
        if all(f[key] in allowed for key, allowed in cond.tests):
            return Fraction(pays)
    return Fraction(-1)


def expected(
    dist: Mapping[Any, Fraction],
    rules: Sequence[tuple[Condition, Fraction]],
    key_facts: Callable[[Any], Mapping[str, Any]],
) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    win = push = lose = ev = Fraction(0)
    for key, p in dist.items():
        x = settle_bet(rules, key_facts(key))
        ev += x * p
        if x > 0:
            win += p
        elif x == 0:
            push += p
        else:
            lose += p
    return win, push, lose, ev


def to_values(counts: Sequence[int]) -> list[int]:
    return [counts[9] + counts[10] + counts[11] + counts[12], *counts[:9]]


def profile_bets(name: str) -> tuple[dict[str, list[tuple[Condition, Fraction]]], Tableau]:
    return from_profile(load_profile(name))


def is_pair_bet(rules: Sequence[tuple[Condition, Fraction]]) -> bool:
    return any(k in ("player_pair", "banker_pair") for cond, _ in rules for k in cond.keys)


# --- compositions ------------------------------------------------------------------------


def _depleted(seed: int, decks: int, remove: int) -> list[int]:
    rng = random.Random(seed)
    cards = [r for r in range(13) for _ in range(4 * decks)]
    rng.shuffle(cards)
    counts = [0] * 13
    for r in cards[remove:]:
        counts[r] += 1
    return counts


COMPOSITIONS = {
    "1 deck": [4] * 13,
    "2 decks": [8] * 13,
    "1 deck less 20 random cards": _depleted(1, 1, 20),
    "2 decks less 61 random cards": _depleted(2, 2, 61),
    # lopsided: no 8s or 9s at all (no naturals from them), many faces
    "no 8s/9s, heavy on faces": [3, 2, 1, 4, 0, 5, 6, 0, 0, 9, 1, 7, 2],
    "tiny: 7 cards": [1, 0, 2, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1],
}


@pytest.fixture(scope="module")
def brute() -> dict[str, dict[Cls, Fraction]]:
    return {name: brute_force(to_values(c)) for name, c in COMPOSITIONS.items()}


# --- published figures -------------------------------------------------------------------

# Ordered six-card sequences from a fresh 8-deck shoe (Wizard of Odds,
# "Baccarat", probabilities appendix; the same figures in Thorp, "The
# Mathematics of Gambling"): 4,998,398,275,503,360 = 416*415*414*413*412*411.
EIGHT_DECK_SEQUENCES = 4_998_398_275_503_360
EIGHT_DECK_WAYS = {
    "banker": 2_292_252_566_437_888,
    "player": 2_230_518_282_592_256,
    "tie": 475_627_426_473_216,
}
# Wizard of Odds, "EZ Baccarat" (Michael Shackleford), 8 decks.
EIGHT_DECK_DRAGON7_WAYS = 112_633_011_329_024
EIGHT_DECK_PANDA8_WAYS = 172_660_763_262_976
# Wizard of Odds, "Baccarat Odds for 1 to 12 Decks": one deck.
ONE_DECK_SEQUENCES = 14_658_134_400
ONE_DECK_WAYS = {"player": 6_548_674_432, "banker": 6_737_232_640, "tie": 1_372_227_328}


def test_fresh_eight_deck_outcomes_are_the_published_counts() -> None:
    bets, tab = profile_bets("punto_banco")
    r = odds_for(rank_counts(8), bets, tab, exact=True)
    assert EIGHT_DECK_SEQUENCES == 416 * 415 * 414 * 413 * 412 * 411
    for who, ways in EIGHT_DECK_WAYS.items():
        assert r.outcomes[who] == Fraction(ways, EIGHT_DECK_SEQUENCES)
    assert r.cards_left == 416


def test_fresh_one_deck_outcomes_are_the_published_counts() -> None:
    bets, tab = profile_bets("punto_banco")
    r = odds_for(rank_counts(1), bets, tab, exact=True)
    for who, ways in ONE_DECK_WAYS.items():
        assert r.outcomes[who] == Fraction(ways, ONE_DECK_SEQUENCES)


def test_ez_side_bets_are_the_published_counts() -> None:
    bets, tab = profile_bets("ez_baccarat")
    r = odds_for(rank_counts(8), bets, tab, exact=True)
    assert r.bets["dragon7"].win == Fraction(EIGHT_DECK_DRAGON7_WAYS, EIGHT_DECK_SEQUENCES)
    assert r.bets["panda8"].win == Fraction(EIGHT_DECK_PANDA8_WAYS, EIGHT_DECK_SEQUENCES)
    # the EZ Banker bet pushes exactly when Dragon 7 wins (plus every tie)
    assert r.bets["banker"].push == r.bets["dragon7"].win + r.outcomes["tie"]


# Published 8-deck house edges (Wizard of Odds "Baccarat" and "EZ Baccarat"),
# in percent to two places; our exact values round to them.
PUBLISHED_EDGES = [
    ("punto_banco", "banker", "1.06"),
    ("punto_banco", "player", "1.24"),
    ("punto_banco", "tie", "14.36"),
    ("punto_banco", "player_pair", "10.36"),
    ("punto_banco", "banker_pair", "10.36"),
    ("ez_baccarat", "banker", "1.02"),
    ("ez_baccarat", "dragon7", "7.61"),
    ("ez_baccarat", "panda8", "10.19"),
]


@pytest.mark.parametrize(("profile", "bet", "edge"), PUBLISHED_EDGES)
def test_published_house_edges(profile: str, bet: str, edge: str) -> None:
    bets, tab = profile_bets(profile)
    r = odds_for(rank_counts(8), bets, tab, exact=True)
    assert f"{float(r.bets[bet].house_edge * 100):.2f}" == edge


# --- brute force agreement ----------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("comp", list(COMPOSITIONS))
def test_every_bet_matches_brute_force(
    brute: dict[str, dict[Cls, Fraction]], profile: str, comp: str
) -> None:
    counts = COMPOSITIONS[comp]
    dist = brute[comp]
    bets, tab = profile_bets(profile)
    r = odds_for(counts, bets, tab, exact=True)
    assert r.cards_left == sum(counts)
    for who in ("player", "banker", "tie"):
        assert r.outcomes[who] == sum(
            (p for cls, p in dist.items() if facts(cls)["winner"] == who), Fraction(0)
        )
    for name, rules in bets.items():
        if is_pair_bet(rules):
            continue  # pairs: below, by ranks
        win, push, lose, ev = expected(dist, rules, facts)
        got = r.bets[name]
        assert (got.win, got.push, got.lose, got.ev) == (win, push, lose, ev), name
        assert got.house_edge == -ev


def test_brute_force_itself_sums_to_one(brute: dict[str, dict[Cls, Fraction]]) -> None:
    assert sum(brute["1 deck"].values()) == 1


@pytest.mark.parametrize("cards", [4, 5])
def test_shoe_too_short_to_finish_every_coup(cards: int) -> None:
    """With fewer than six cards some coups cannot be completed: the odds
    are those of completing with that result, and they fall short of 1."""
    counts = [0] * 13
    for rank in (0, 4, 9, 5, 2)[:cards]:
        counts[rank] += 1
    dist = brute_force(to_values(counts))
    bets, tab = profile_bets("ez_baccarat")
    r = odds_for(counts, bets, tab, exact=True)
    for name, rules in bets.items():
        win, push, lose, ev = expected(dist, rules, facts)
        got = r.bets[name]
        assert (got.win, got.push, got.lose, got.ev) == (win, push, lose, ev), name
    total = sum(dist.values())
    assert sum(r.outcomes.values()) == total


@pytest.mark.parametrize(
    "ranks",
    [(1, 1, 3, 3), (1, 1, 3, 3, 5), (0, 0, 0, 9, 9), (4, 4, 4, 4, 12), (5, 5, 8, 8, 2), (9, 10, 9, 10)],
)
def test_pair_bets_of_a_shoe_too_short_to_finish_count_only_completed_coups(
    ranks: tuple[int, ...],
) -> None:
    """A coup the shoe cannot finish is void: its pair bets are not settled
    either (they used to be counted on the first four cards whatever came
    after, so pair bets alone summed to 1)."""
    counts = [0] * 13
    for rank in ranks:
        counts[rank] += 1
    dist = brute_force_ranks(counts)
    bets, tab = profile_bets("punto_banco")
    r = odds_for(counts, bets, tab, exact=True)
    for name, rules in bets.items():
        win, push, lose, ev = expected(dist, rules, lambda k: facts(*k))
        got = r.bets[name]
        assert (got.win, got.push, got.lose, got.ev) == (win, push, lose, ev), name
        assert got.win + got.push + got.lose == sum(dist.values()) == sum(r.outcomes.values())


def test_fewer_than_four_cards_gives_nothing() -> None:
    bets, tab = profile_bets("punto_banco")
    r = odds_for([1, 1, 1] + [0] * 10, bets, tab, exact=True)
    assert r.cards_left == 3
    assert all(p == 0 for p in r.outcomes.values())
    assert all(b.win == b.push == b.lose == b.ev == 0 for b in r.bets.values())


# --- pairs --------------------------------------------------------------------------------


def first_four_pairs(counts: Sequence[int]) -> dict[tuple[bool, bool], Fraction]:
    """P(player pair, banker pair) by walking the ranks of cards 1..4."""
    total = sum(counts)
    den = total * (total - 1) * (total - 2) * (total - 3)
    out: dict[tuple[bool, bool], Fraction] = defaultdict(Fraction)
    for seq in itertools.product(range(13), repeat=4):
        left = list(counts)
        w = 1
        for r in seq:
            w *= left[r]
            left[r] -= 1
            if w == 0:
                break
        if w:
            out[seq[0] == seq[2], seq[1] == seq[3]] += Fraction(w, den)
    return out


@pytest.mark.parametrize("comp", ["1 deck", "1 deck less 20 random cards", "no 8s/9s, heavy on faces"])
def test_pair_bets_match_rank_walk(comp: str) -> None:
    counts = COMPOSITIONS[comp]
    cells = first_four_pairs(counts)
    bets, tab = profile_bets("punto_banco")
    r = odds_for(counts, bets, tab, exact=True)
    for name in ("player_pair", "banker_pair"):
        win, push, lose, ev = expected(
            cells, bets[name], lambda k: {"player_pair": k[0], "banker_pair": k[1]}
        )
        got = r.bets[name]
        assert (got.win, got.push, got.lose, got.ev) == (win, push, lose, ev), name


def test_pair_closed_form() -> None:
    """P(player pair) = sum_r n_r (n_r - 1) / (N (N - 1))."""
    counts = COMPOSITIONS["2 decks less 61 random cards"]
    n = sum(counts)
    closed = Fraction(sum(x * (x - 1) for x in counts), n * (n - 1))
    bets, tab = profile_bets("baccarat_27")
    r = odds_for(counts, bets, tab, exact=True)
    assert r.bets["player_pair"].win == closed
    assert r.bets["banker_pair"].win == closed
    # 8 decks: 13 * 32 * 31 / (416 * 415)
    r8 = odds_for(rank_counts(8), bets, tab, exact=True)
    assert r8.bets["player_pair"].win == Fraction(13 * 32 * 31, 416 * 415)


def test_joint_pair_bet() -> None:
    """A bet on both pairs at once (pair-only, but joint): the closed form
    must get the dependence between cards 1,3 and 2,4 right."""
    counts = COMPOSITIONS["1 deck less 20 random cards"]
    both: BetTable = {
        "both": [
            (Condition.of(player_pair=True, banker_pair=True), Fraction(200)),
            (Condition(), Fraction(-1)),
        ]
    }
    cells = first_four_pairs(counts)
    r = odds_for(counts, both, STANDARD_TABLEAU, exact=True)
    assert r.bets["both"].win == cells[True, True]


# Bets that mix a pair with other facts (no shipped profile has one): the
# cells with two first cards of value 0 are pairs only by rank.
MIXED: BetTable = {
    "banker_pair_banker_wins": [
        (Condition.of(banker_pair=True, winner="banker"), Fraction(30)),
        (Condition.of(banker_pair=True), Fraction(0)),
        (Condition(), Fraction(-1)),
    ],
    "player_pair_natural": [
        (Condition.of(player_pair=True, natural=True), Fraction(50)),
        (Condition(), Fraction(-1)),
    ],
    "both_pairs_tie": [
        (Condition.of(player_pair=True, banker_pair=True, winner="tie"), Fraction(1000)),
        (Condition.of(player_pair=False, banker_pair=False, winner="tie"), Fraction(1, 2)),
        (Condition(), Fraction(-1)),
    ],
    "player": [
        (Condition.of(winner="player"), Fraction(1)),
        (Condition.of(winner="tie"), Fraction(0)),
        (Condition(), Fraction(-1)),
    ],
}

SMALL_SHOES = {
    # value-0 ranks in several copies so that equal values are not always equal ranks
    "faces and a few values": [3, 0, 0, 0, 2, 0, 0, 0, 2, 3, 2, 1, 3],
    "faces only, two of each": [0] * 9 + [2, 2, 2, 2],
    "five cards": [1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 1],
}


@pytest.mark.parametrize("shoe", list(SMALL_SHOES))
def test_mixed_pair_bets_match_rank_brute_force(shoe: str) -> None:
    counts = SMALL_SHOES[shoe]
    dist = brute_force_ranks(counts)
    r = odds_for(counts, MIXED, STANDARD_TABLEAU, exact=True)
    for name, rules in MIXED.items():
        win, push, lose, ev = expected(dist, rules, lambda k: facts(*k))
        got = r.bets[name]
        assert (got.win, got.push, got.lose, got.ev) == (win, push, lose, ev), name


def test_mixed_pair_bets_on_a_full_deck_are_consistent() -> None:
    """One deck is too big for the rank walk; check what must hold."""
    r = odds_for(rank_counts(1), MIXED, STANDARD_TABLEAU, exact=True)
    bp = r.bets["banker_pair_banker_wins"]
    assert bp.win + bp.push == Fraction(13 * 4 * 3, 52 * 51)  # a banker pair, whoever wins
    assert bp.win + bp.push + bp.lose == 1
    assert r.bets["player"].win == Fraction(ONE_DECK_WAYS["player"], ONE_DECK_SEQUENCES)


# --- the tableau is data ---------------------------------------------------------------------


def test_a_different_tableau() -> None:
    """Player draws on 0-6 and Banker always draws on 3: the odds follow the
    data, not the standard rules."""

    def player_draws(p: int) -> bool:
        return p <= 6

    def banker_draws(b: int, p3: int | None) -> bool:
        return b == 3 or std_banker_draws(b, p3)

    tab = Tableau.of(
        natural=[8, 9],
        player_draws_on=range(7),
        banker_draws_when_player_stood=range(6),
        banker_draws_when_player_drew={
            0: range(10),
            1: range(10),
            2: range(10),
            3: range(10),
            4: range(2, 8),
            5: range(4, 8),
            6: [6, 7],
        },
    )
    counts = COMPOSITIONS["1 deck less 20 random cards"]
    dist = brute_force(to_values(counts), player_draws, banker_draws)
    bets, _ = profile_bets("ez_baccarat")
    r = odds_for(counts, bets, tab, exact=True)
    for name, rules in bets.items():
        win, push, lose, ev = expected(dist, rules, facts)
        got = r.bets[name]
        assert (got.win, got.push, got.lose, got.ev) == (win, push, lose, ev), name
    standard = odds_for(counts, bets, STANDARD_TABLEAU, exact=True)
    assert standard.outcomes != r.outcomes


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_use_the_standard_tableau(profile: str) -> None:
    _, tab = profile_bets(profile)
    assert tab == STANDARD_TABLEAU


# --- float and exact ---------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_float_agrees_with_exact(profile: str) -> None:
    bets, tab = profile_bets(profile)
    calc = OddsCalculator(bets, tab)
    for counts in (rank_counts(8), _depleted(5, 8, 300), COMPOSITIONS["tiny: 7 cards"]):
        fast = calc.compute(counts)
        exact = calc.compute(counts, exact=True)
        for who in fast.outcomes:
            assert isinstance(fast.outcomes[who], float)
            assert fast.outcomes[who] == pytest.approx(float(exact.outcomes[who]), rel=1e-12, abs=1e-15)
        for name, b in fast.bets.items():
            e = exact.bets[name]
            for field in ("win", "push", "lose", "ev"):
                assert getattr(b, field) == pytest.approx(float(getattr(e, field)), rel=1e-12, abs=1e-15)


def test_probabilities_sum_to_one() -> None:
    bets, tab = profile_bets("baccarat_27")
    r = odds_for(_depleted(9, 6, 150), bets, tab, exact=True)
    assert sum(r.outcomes.values()) == 1
    for b in r.bets.values():
        assert b.win + b.push + b.lose == 1


# --- inputs --------------------------------------------------------------------------------------


def test_counts_as_mapping_or_list() -> None:
    bets, tab = profile_bets("punto_banco")
    counts = _depleted(3, 1, 10)
    as_map = dict(zip(RANKS, counts, strict=True))
    assert odds_for(as_map, bets, tab, exact=True) == odds_for(counts, bets, tab, exact=True)
    # missing ranks count as none left
    del as_map["K"]
    counts[12] = 0
    assert odds_for(as_map, bets, tab, exact=True) == odds_for(counts, bets, tab, exact=True)


@pytest.mark.parametrize(
    "bad",
    [{"Z": 3}, {"A": -1}, [4] * 12, [4] * 12 + [-1], [200] * 13],
)
def test_bad_counts(bad: Any) -> None:
    bets, tab = profile_bets("punto_banco")
    with pytest.raises(ValueError):
        odds_for(bad, bets, tab)


def test_calculator_for_profile() -> None:
    profile = load_profile("baccarat_27")
    calc = OddsCalculator.for_profile(profile)
    assert calc.bet_names == profile.bet_names
    assert calc.lanes == 5  # player, tie, banker with 2, banker with 7, other banker wins
    r = calc.compute(rank_counts(8))
    assert r.bets["banker"].win == r.outcomes["banker"]  # every Banker win pays something in Baccarat 27
    assert 0 < r.bets["b27"].win < r.outcomes["banker"]


def test_rank_counts() -> None:
    assert rank_counts(8) == [32] * 13
    c = rank_counts(1, ["7H", "7s", "kd", "10C"])
    assert c[RANKS.index("7")] == 2
    assert c[RANKS.index("K")] == 3
    assert c[RANKS.index("T")] == 3
    assert sum(c) == 48
    assert value_counts(c) == [14, 4, 4, 4, 4, 4, 4, 2, 4, 4]
    with pytest.raises(CardError, match="not a card"):
        rank_counts(8, ["1H"])
    with pytest.raises(CardError, match="cannot remove 7H 2 times: a shoe of 1 deck"):
        rank_counts(1, ["7H", "7H"])
    with pytest.raises(ValueError):
        rank_counts(0)


def test_condition_of() -> None:
    c = Condition.of(winner="banker", banker_total=[2, 7])
    assert c.keys == {"winner", "banker_total"}
    assert c.matches({"winner": "banker", "banker_total": 7})
    assert not c.matches({"winner": "banker", "banker_total": 3})
    assert Condition().matches({})
    with pytest.raises(ValueError, match="unknown condition"):
        Condition.of(colour="red")


def test_unmatched_bet_loses() -> None:
    only_ties: BetTable = {"tie_only": [(Condition.of(winner="tie"), Fraction(8))]}
    r = odds_for(rank_counts(8), only_ties, STANDARD_TABLEAU, exact=True)
    assert r.bets["tie_only"].lose == 1 - r.outcomes["tie"]


# --- the `odds` command -----------------------------------------------------------------------


def test_odds_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from controller.cli import main

    assert main(["odds", "--json", "--profile", "ez_baccarat", "--remove", "7H, 7S,kd"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"decks", "profile", "cards_left", "outcomes", "incomplete", "bets", "exact"}
    assert (doc["decks"], doc["profile"], doc["cards_left"]) == (8, "ez_baccarat", 413)
    assert doc["incomplete"] == 0 and doc["exact"]["incomplete"] == "0"
    assert set(doc["bets"]) == {"player", "banker", "tie", "dragon7", "panda8"}
    bets, tab = profile_bets("ez_baccarat")
    want = odds_for(rank_counts(8, ["7H", "7S", "KD"]), bets, tab, exact=True)
    for name, b in doc["bets"].items():
        assert set(b) == {"win", "push", "lose", "ev", "house_edge"}
        exact = doc["exact"]["bets"][name]
        assert Fraction(exact["ev"]) == want.bets[name].ev
        assert Fraction(exact["house_edge"]) == -want.bets[name].ev
        assert b["win"] == float(Fraction(exact["win"]))
    for who, p in doc["outcomes"].items():
        assert Fraction(doc["exact"]["outcomes"][who]) == want.outcomes[who]
        assert p == float(want.outcomes[who])


def test_odds_command_table(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main

    assert main(["odds", "--decks", "8"]) == 0
    out = capsys.readouterr().out
    assert "416 cards left" in out
    assert "1.0579%" in out  # Banker's house edge
    assert "14.3596%" in out  # Tie's


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--remove", "1H"], "--remove: not a card: '1H'"),
        (["--decks", "1", "--remove", "AS,AS"], "cannot remove AS 2 times"),
        (["--decks", "13"], "--decks must be 1..12"),
        (["--profile", "no_such_game"], "no_such_game"),
    ],
)
def test_odds_command_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    from controller.cli import main

    assert main(["odds", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""
