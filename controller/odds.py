"""Exact odds of every bet for any shoe composition.

Given how many cards of each rank remain (13 counts: pair bets need ranks),
:func:`odds_for` gives the probability of Player / Banker / Tie and, for
every bet of a profile, ``win`` = P(net > 0), ``push`` = P(net == 0),
``lose`` = P(net < 0) and ``ev`` = the expected net per unit staked
(``house_edge = -ev``). The numbers are exact for the composition: with
``exact=True`` they are :class:`fractions.Fraction`; otherwise they are
floats, each the correctly rounded value of the exact one (the counting is
done in integers either way, only the final division differs).

Bets are data (:data:`BetTable`): for each bet an ordered list of
``(Condition, net)`` rules, the first matching rule giving the net result
per unit; a bet with no matching rule loses (-1). A condition may test
``winner``, ``player_total``, ``banker_total``, ``player_cards``,
``banker_cards``, ``natural``, ``player_pair`` and ``banker_pair``. The
third-card :class:`Tableau` is data too. :func:`from_profile` turns a
``controller.rules.Profile`` into both.

How it is fast (about 1 ms for every bet of a profile, pure Python)
------------------------------------------------------------------
* Only card *values* (10 classes) decide the coup. A coup uses at most six
  cards, and the weight of an ordered sequence of physical cards depends
  only on the *multiset* of its values: ``F(m) = prod_v (c_v)_(m_v)``
  (falling factorials of the remaining counts). Coups that use four or
  five cards are extended by any two or one further cards (the sum over
  the extensions is the coup's own weight times ``(N-4)(N-5)`` or
  ``(N-5)``), so the number of ordered six-card sequences giving an
  outcome class is ``sum_m F(m) * n(class, m)`` over the 5005 multisets
  of six values, with ``n`` independent of the shoe: it is counted once
  per tableau by walking the tableau (cached).
* The classes every bet of the profile treats alike are merged into
  *atoms* (punto banco: Player, Banker, Tie); each atom's static counts sit
  in their own 64-bit lane of one Python integer per multiset, so one
  C-level dot product ``sum(map(mul, F, packed))`` counts every atom at
  once. Lanes never overflow: each is at most ``(N)_6 < 2**64``.
* Pair bets depend on ranks, which the value walk does not see. A bet
  that tests only ``player_pair``/``banker_pair`` is exact in closed form
  (cards 1 and 3 are Player's, 2 and 4 Banker's):
  ``P(player pair) = sum_r n_r (n_r - 1) / (N (N - 1))``, and the joint
  law of both pairs from ``sum_r (n_r)_4`` and ``sum_r n_r (n_r - 1)``.
  A bet that mixes a pair with other facts (none of the shipped profiles
  has one) is still exact: two first cards of equal value 1..9 are a pair
  for sure; two of value 0 (10/J/Q/K) are a pair with a probability that
  depends only on the counts of those four ranks and is independent of
  the rest of the coup, so such cells get their own lanes and a weight.

With fewer than six cards left some coups cannot be completed: the
probabilities are then those of a coup completing with that result and
``win + push + lose`` falls short of 1 by the chance the shoe runs out (a
coup the shoe cannot finish is void and settles no bet, pair bets
included: with under six cards those are counted by walking every order of
the cards). Bets that mix a pair with other facts keep the six-card
weighting there.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from operator import mul
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from controller.cards import RANK_VALUE, RANKS, CardError, parse_card

if TYPE_CHECKING:
    from controller.rules import Profile

__all__ = [
    "STANDARD_TABLEAU",
    "BetOdds",
    "BetTable",
    "Condition",
    "OddsCalculator",
    "OddsResult",
    "Tableau",
    "from_profile",
    "odds_for",
    "rank_counts",
    "value_counts",
]

CONDITION_KEYS = frozenset(
    {
        "winner",
        "player_total",
        "banker_total",
        "player_cards",
        "banker_cards",
        "player_pair",
        "banker_pair",
        "natural",
    }
)
_PAIR_KEYS = frozenset({"player_pair", "banker_pair"})
_LANE_BITS = 64
_LANE_MASK = (1 << _LANE_BITS) - 1
#: compositions whose float odds a calculator keeps (``OddsCalculator.prepare``):
#: the two views of the coup being dealt, and of the one before
_RECENT = 8


# --- the interface: conditions, bet tables, tableau -----------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    """A conjunction of ``key in allowed`` tests; no tests matches everything."""

    tests: tuple[tuple[str, frozenset[Any]], ...] = ()

    @classmethod
    def of(cls, when: Mapping[str, Any] | None = None, /, **kw: Any) -> Condition:
        """``Condition.of(winner="banker", banker_total=[2, 7])``: a list (or
        set) means any of its values; a scalar means that value."""
        items = dict(when or {})
        items.update(kw)
        tests = []
        for key, want in items.items():
            if key not in CONDITION_KEYS:
                raise ValueError(f"unknown condition {key!r} (one of {', '.join(sorted(CONDITION_KEYS))})")
            allowed = (
                frozenset(want) if isinstance(want, list | tuple | set | frozenset) else frozenset([want])
            )
            tests.append((key, allowed))
        return cls(tuple(sorted(tests, key=lambda t: t[0])))

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(k for k, _ in self.tests)

    def matches(self, facts: Mapping[str, Any]) -> bool:
        return all(facts[k] in allowed for k, allowed in self.tests)


#: For each bet, its rules in order: the first matching condition gives the
#: net result per unit staked (8 for a win at 8:1, 0 for a push, -1 a loss).
BetTable = Mapping[str, Sequence[tuple[Condition, Fraction]]]


@dataclass(frozen=True, slots=True)
class Tableau:
    """The third-card rules as plain data (totals and card values 0..9)."""

    natural: frozenset[int]
    player_draws_on: frozenset[int]
    banker_draws_when_player_stood: frozenset[int]
    #: indexed by Banker's two-card total: the Player third-card values on
    #: which Banker draws.
    banker_draws_when_player_drew: tuple[frozenset[int], ...]

    @classmethod
    def of(
        cls,
        natural: Iterable[int],
        player_draws_on: Iterable[int],
        banker_draws_when_player_stood: Iterable[int],
        banker_draws_when_player_drew: Mapping[int, Iterable[int]],
    ) -> Tableau:
        return cls(
            natural=frozenset(natural),
            player_draws_on=frozenset(player_draws_on),
            banker_draws_when_player_stood=frozenset(banker_draws_when_player_stood),
            banker_draws_when_player_drew=tuple(
                frozenset(banker_draws_when_player_drew.get(t, ())) for t in range(10)
            ),
        )


#: The standard tableau (docs/dealing-errors.md, The tableau), the same in all three shipped profiles.
STANDARD_TABLEAU = Tableau.of(
    natural=[8, 9],
    player_draws_on=range(6),
    banker_draws_when_player_stood=range(6),
    banker_draws_when_player_drew={
        0: range(10),
        1: range(10),
        2: range(10),
        3: [0, 1, 2, 3, 4, 5, 6, 7, 9],
        4: range(2, 8),
        5: range(4, 8),
        6: [6, 7],
    },
)


def from_profile(profile: Profile) -> tuple[dict[str, list[tuple[Condition, Fraction]]], Tableau]:
    """The bet table and tableau of a ``controller.rules.Profile``."""
    t = profile.tableau
    tableau = Tableau(
        natural=frozenset(x for x in range(10) if t.natural[x]),
        player_draws_on=frozenset(x for x in range(10) if t.player_draws[x]),
        banker_draws_when_player_stood=frozenset(x for x in range(10) if t.banker_draws_stood[x]),
        banker_draws_when_player_drew=tuple(
            frozenset(v for v in range(10) if t.banker_draws[b][v]) for b in range(10)
        ),
    )
    bets = {
        name: [(Condition(tuple(sorted(rule.when, key=lambda w: w[0]))), rule.pays) for rule in rules]
        for name, rules in profile.bets.items()
    }
    return bets, tableau


# --- results ---------------------------------------------------------------------

Num = TypeVar("Num", float, Fraction)


@dataclass(frozen=True, slots=True)
class BetOdds(Generic[Num]):
    win: Num
    push: Num
    lose: Num
    ev: Num

    @property
    def house_edge(self) -> Num:
        return -self.ev


@dataclass(frozen=True, slots=True)
class OddsResult(Generic[Num]):
    cards_left: int
    #: ``player``, ``banker``, ``tie``: probability of each winner.
    outcomes: dict[str, Num]
    bets: dict[str, BetOdds[Num]] = field(default_factory=dict)


# --- shoe compositions -------------------------------------------------------------


def rank_counts(decks: int, removed: Iterable[str] = ()) -> list[int]:
    """Counts per rank (``RANKS`` order) of a ``decks``-deck shoe less the
    ``removed`` card codes. Raises ValueError (CardError for a bad code)
    when a card is not a card or has no copy left to remove."""
    if decks < 1:
        raise ValueError(f"decks must be at least 1, not {decks}")
    per_card: dict[str, int] = {}
    for text in removed:
        code = parse_card(text)
        per_card[code] = per_card.get(code, 0) + 1
        if per_card[code] > decks:
            raise CardError(
                f"cannot remove {code} {per_card[code]} times: a shoe of {decks} deck(s) holds {decks}"
            )
    counts = [4 * decks] * 13
    for code, n in per_card.items():
        counts[RANKS.index(code[0])] -= n
    return counts


def _as_rank_counts(counts: Mapping[str, int] | Sequence[int]) -> list[int]:
    if isinstance(counts, Mapping):
        unknown = [k for k in counts if k not in RANK_VALUE]
        if unknown:
            raise ValueError(f"not a rank: {unknown[0]!r} (ranks are {RANKS})")
        out = [int(counts.get(r, 0)) for r in RANKS]
    else:
        out = [int(x) for x in counts]
        if len(out) != 13:
            raise ValueError(f"expected 13 counts (ranks {RANKS}), got {len(out)}")
    if any(x < 0 for x in out):
        raise ValueError("a rank count is negative")
    return out


def _falling(n: int, k: int) -> int:
    r = 1
    for i in range(k):
        r *= n - i
    return r


# --- static tables: multisets of values ----------------------------------------------

_POW7 = [7**v for v in range(10)]  # multiset key: sum of 7**value over its cards (at most 6 cards)


@dataclass(frozen=True, slots=True)
class _Chain:
    """The multisets of 0..6 values from an alphabet, level by level in
    ``combinations_with_replacement`` order, and how to build ``F`` of a
    level from the one below: ``F[k][i] = F[k-1][parent[k][i]] *
    fac[factor[k][i]]`` with ``fac[6*v + j] = c_v - j``."""

    levels: tuple[tuple[tuple[int, ...], ...], ...]
    index: tuple[dict[int, int], ...]  # [size] key7 -> position
    parent: tuple[list[int], ...]
    factor: tuple[list[int], ...]

    def weights(self, fac: Sequence[int], upto: int = 6) -> list[list[int]]:
        out = [[1]]
        for k in range(1, upto + 1):
            f = out[-1]
            out.append(
                list(map(mul, map(f.__getitem__, self.parent[k]), map(fac.__getitem__, self.factor[k])))
            )
        return out


def _key7(m: Iterable[int]) -> int:
    return sum(_POW7[v] for v in m)


def _chain(alphabet: Sequence[int]) -> _Chain:
    levels = tuple(tuple(itertools.combinations_with_replacement(alphabet, k)) for k in range(7))
    index = tuple({_key7(m): i for i, m in enumerate(ms)} for ms in levels)
    parent = tuple([index[k - 1][_key7(m[:-1])] for m in levels[k]] if k else [] for k in range(7))
    factor = tuple([6 * m[-1] + m[:-1].count(m[-1]) for m in levels[k]] if k else [] for k in range(7))
    return _Chain(levels, index, parent, factor)


@dataclass(frozen=True, slots=True)
class _Multisets:
    full: _Chain  # values 0..9
    lo: _Chain  # values 0..4
    hi: _Chain  # values 5..9
    lift4: list[list[tuple[int, int]]]  # size-4 position -> [(size-6 position, ordered extensions)]
    lift5: list[list[int]]  # size-5 position -> [size-6 position] (one per appended value)
    #: six cards = k from 0..4 and 6-k from 5..9: for each k, the size-6
    #: positions as a matrix over (lo multiset, hi multiset), or its
    #: transpose (``by_hi``) when there are fewer hi multisets.
    blocks: tuple[tuple[int, bool, list[list[int]]], ...]


@functools.cache
def _multisets() -> _Multisets:
    full, lo, hi = _chain(range(10)), _chain(range(5)), _chain(range(5, 10))
    i6 = full.index[6]
    keys4 = [_key7(m) for m in full.levels[4]]
    lift4 = [
        [(i6[key + _POW7[x] + _POW7[y]], 1 if x == y else 2) for x in range(10) for y in range(x, 10)]
        for key in keys4
    ]
    lift5 = [[i6[_key7(m) + _POW7[x]] for x in range(10)] for m in full.levels[5]]
    blocks = []
    for k in range(7):
        rows = [[i6[_key7(a) + _key7(b)] for b in hi.levels[6 - k]] for a in lo.levels[k]]
        by_hi = len(lo.levels[k]) > len(hi.levels[6 - k])
        blocks.append((k, by_hi, [list(col) for col in zip(*rows, strict=True)] if by_hi else rows))
    return _Multisets(full, lo, hi, lift4, lift5, tuple(blocks))


def _factors(c: Sequence[int]) -> list[int]:
    return [c[v] - j for v in range(10) for j in range(6)]


# --- static tables: walking the tableau ---------------------------------------------

#: (player_total, banker_total, player_cards, banker_cards, natural)
ClassKey = tuple[int, int, int, int, bool]
#: pair status of a hand's first two cards: 0 no pair, 1 a pair (equal value
#: 1..9), 2 equal value 0 (a pair only if also equal rank among 10/J/Q/K).
_Cell = tuple[ClassKey, int, int]


@functools.lru_cache(maxsize=16)
def _walk(tab: Tableau) -> dict[_Cell, tuple[dict[int, int], dict[int, int], dict[int, int]]]:
    """Every coup the tableau allows, counted as ordered value sequences:
    cell -> (size-4, size-5, size-6 counts by multiset position)."""
    full = _multisets().full
    idx4, idx5, idx6 = full.index[4], full.index[5], full.index[6]
    out: dict[_Cell, tuple[dict[int, int], dict[int, int], dict[int, int]]] = {}

    def slot(cell: _Cell) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        s = out.get(cell)
        if s is None:
            s = out[cell] = ({}, {}, {})
        return s

    nat = tab.natural
    pdraw = tab.player_draws_on
    bstood = tab.banker_draws_when_player_stood
    bdrew = tab.banker_draws_when_player_drew
    hands = [(a, b, 1 if a == b else 2) for a in range(10) for b in range(a, 10)]  # unordered 2 cards
    for p1, p2, mp in hands:
        pt = (p1 + p2) % 10
        ps = (1 if p1 else 2) if p1 == p2 else 0
        kp = _POW7[p1] + _POW7[p2]
        for b1, b2, mb in hands:
            bt = (b1 + b2) % 10
            bs = (1 if b1 else 2) if b1 == b2 else 0
            k4 = kp + _POW7[b1] + _POW7[b2]
            w = mp * mb
            if pt in nat or bt in nat:
                d = slot(((pt, bt, 2, 2, True), ps, bs))[0]
                i = idx4[k4]
                d[i] = d.get(i, 0) + w
            elif pt in pdraw:
                draws = bdrew[bt]
                for v in range(10):
                    pt3 = (pt + v) % 10
                    k5 = k4 + _POW7[v]
                    if v in draws:
                        for u in range(10):
                            d = slot(((pt3, (bt + u) % 10, 3, 3, False), ps, bs))[2]
                            i = idx6[k5 + _POW7[u]]
                            d[i] = d.get(i, 0) + w
                    else:
                        d = slot(((pt3, bt, 3, 2, False), ps, bs))[1]
                        i = idx5[k5]
                        d[i] = d.get(i, 0) + w
            elif bt in bstood:
                for u in range(10):
                    d = slot(((pt, (bt + u) % 10, 2, 3, False), ps, bs))[1]
                    i = idx5[k4 + _POW7[u]]
                    d[i] = d.get(i, 0) + w
            else:
                d = slot(((pt, bt, 2, 2, False), ps, bs))[0]
                i = idx4[k4]
                d[i] = d.get(i, 0) + w
    return out


# --- compiling a bet table -----------------------------------------------------------


def _winner(pt: int, bt: int) -> str:
    return "player" if pt > bt else "banker" if bt > pt else "tie"


def _facts(cls: ClassKey, pairs: tuple[bool, bool] | None) -> dict[str, Any]:
    pt, bt, pc, bc, natural = cls
    facts: dict[str, Any] = {
        "winner": _winner(pt, bt),
        "player_total": pt,
        "banker_total": bt,
        "player_cards": pc,
        "banker_cards": bc,
        "natural": natural,
    }
    if pairs is not None:
        facts["player_pair"], facts["banker_pair"] = pairs
    return facts


def _net(rules: Sequence[tuple[Condition, Fraction]], facts: Mapping[str, Any]) -> Fraction:
    for cond, pays in rules:
        if cond.matches(facts):
            return Fraction(pays)
    return Fraction(-1)


_PAIR_CELLS = ((True, True), (True, False), (False, True), (False, False))


def _pair_options(status: int) -> tuple[bool, ...]:
    return ((False,), (True,), (True, False))[status]


@dataclass(slots=True)
class _BetPlan:
    """How a bet's result is read off the lane probabilities (or pair cells)."""

    kind: Literal["main", "pair", "mixed"]
    nets: list[Fraction]  # one per lane of its kind (or per pair cell)
    win: list[int] = field(default_factory=list)
    push: list[int] = field(default_factory=list)
    lose: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for i, x in enumerate(self.nets):
            (self.win if x > 0 else self.push if x == 0 else self.lose).append(i)


class OddsCalculator:
    """A bet table and a tableau compiled once; :meth:`compute` per shoe."""

    def __init__(self, bets: BetTable, tableau: Tableau = STANDARD_TABLEAU) -> None:
        self.tableau = tableau
        self.bet_names: tuple[str, ...] = tuple(bets)
        walk = _walk(tableau)
        kinds: dict[str, Literal["main", "pair", "mixed"]] = {}
        for name, rules in bets.items():
            keys: frozenset[str] = frozenset().union(*(cond.keys for cond, _ in rules))
            kinds[name] = "pair" if keys <= _PAIR_KEYS else "mixed" if keys & _PAIR_KEYS else "main"
        main = [n for n in self.bet_names if kinds[n] == "main"]
        mixed = [n for n in self.bet_names if kinds[n] == "mixed"]

        # Atoms: classes alike for the winner and every main bet; then the
        # cells alike for every mixed bet, with their pair status.
        lane_of: dict[tuple[Any, ...], int] = {}
        contributions: list[tuple[int, _Cell]] = []
        for cell in walk:
            cls, ps, bs = cell
            facts = _facts(cls, None)
            key: tuple[Any, ...] = ("main", facts["winner"], *(_net(bets[n], facts) for n in main))
            contributions.append((lane_of.setdefault(key, len(lane_of)), cell))
            if mixed:
                for pp in _pair_options(ps):
                    for bp in _pair_options(bs):
                        f = _facts(cls, (pp, bp))
                        key = ("mixed", ps, bs, pp, bp, *(_net(bets[n], f) for n in mixed))
                        contributions.append((lane_of.setdefault(key, len(lane_of)), cell))
        lane_keys = list(lane_of)  # in lane order
        self._lane_keys = lane_keys
        self._main_lanes = [i for i, k in enumerate(lane_keys) if k[0] == "main"]
        self._mixed_lanes = [i for i, k in enumerate(lane_keys) if k[0] == "mixed"]

        ms = _multisets()
        sizes = (len(ms.full.levels[4]), len(ms.full.levels[5]), len(ms.full.levels[6]))
        packed4, packed5, packed6 = ([0] * n for n in sizes)
        lifted = [0] * sizes[2]
        for lane, cell in contributions:
            shift = lane * _LANE_BITS
            d4, d5, d6 = walk[cell]
            for i, n in d4.items():
                packed4[i] += n << shift
                for j, m in ms.lift4[i]:
                    lifted[j] += (n * m) << shift
            for i, n in d5.items():
                packed5[i] += n << shift
                for j in ms.lift5[i]:
                    lifted[j] += n << shift
            for i, n in d6.items():
                packed6[i] += n << shift
                lifted[i] += n << shift
        self._packed = (packed4, packed5, packed6)
        self._blocks = [(k, by_hi, [[lifted[i] for i in row] for row in pos]) for k, by_hi, pos in ms.blocks]

        self._plans: dict[str, _BetPlan] = {}
        for name in self.bet_names:
            kind = kinds[name]
            if kind == "main":
                at = 2 + main.index(name)
                nets = [lane_keys[i][at] for i in self._main_lanes]
            elif kind == "mixed":
                at = 5 + mixed.index(name)
                nets = [lane_keys[i][at] for i in self._mixed_lanes]
            else:
                nets = [_net(bets[name], {"player_pair": pp, "banker_pair": bp}) for pp, bp in _PAIR_CELLS]
            self._plans[name] = _BetPlan(kind, nets)
        #: the float results of the last few compositions (a live shoe's
        #: odds are asked for once per view per coup; ``prepare`` computes
        #: them ahead, while the table is idle, so that asking costs nothing)
        self._recent: dict[tuple[int, ...], OddsResult[float]] = {}

    @classmethod
    def for_profile(cls, profile: Profile) -> OddsCalculator:
        """The calculator of a ``controller.rules.Profile``'s bets and tableau."""
        return cls(*from_profile(profile))

    @property
    def lanes(self) -> int:
        """How many atoms one update counts (for the curious and the benchmark)."""
        return len(self._lane_keys)

    @overload
    def compute(
        self, counts: Mapping[str, int] | Sequence[int], exact: Literal[False] = ...
    ) -> OddsResult[float]: ...
    @overload
    def compute(
        self, counts: Mapping[str, int] | Sequence[int], exact: Literal[True]
    ) -> OddsResult[Fraction]: ...
    @overload
    def compute(
        self, counts: Mapping[str, int] | Sequence[int], exact: bool
    ) -> OddsResult[float] | OddsResult[Fraction]: ...

    def compute(
        self, counts: Mapping[str, int] | Sequence[int], exact: bool = False
    ) -> OddsResult[float] | OddsResult[Fraction]:
        """Odds of every bet for a shoe holding ``counts`` cards of each rank
        (a mapping rank -> count, or 13 counts in ``RANKS`` order)."""
        n = _as_rank_counts(counts)
        if exact:
            return self._compute(n, Fraction)
        key = tuple(n)
        known = self._recent.get(key)
        if known is None:
            known = self._remember(key, self._compute(n, float))
        # a copy: the caller may change its dicts, the one kept must not change
        return OddsResult(known.cards_left, dict(known.outcomes), dict(known.bets))

    def prepare(self, counts: Mapping[str, int] | Sequence[int]) -> bool:
        """Compute the float odds of ``counts`` now and keep them, so that a
        later ``compute(counts)`` returns at once (the same numbers: the
        same function of the same counts). False if they were already kept.
        For a caller with idle time before it needs them."""
        key = tuple(_as_rank_counts(counts))
        if key in self._recent:
            return False
        self._remember(key, self._compute(list(key), float))
        return True

    def _remember(self, key: tuple[int, ...], result: OddsResult[float]) -> OddsResult[float]:
        recent = self._recent
        recent.pop(key, None)
        recent[key] = result
        while len(recent) > _RECENT:
            del recent[next(iter(recent))]  # the oldest
        return result

    def _count_lifted(self, c: Sequence[int]) -> int:
        """``sum_m F(m) * lifted[m]`` over the six-value multisets, all lanes
        at once, as ``sum_k sum_(a,b) Flo[k][a] * Fhi[6-k][b] * M_k[a][b]``
        (F factorises over values 0..4 and 5..9) without building F."""
        ms = _multisets()
        fac = _factors(c)
        flo = ms.lo.weights(fac)
        fhi = ms.hi.weights(fac)
        s = 0
        for k, by_hi, rows in self._blocks:
            outer, inner = (fhi[6 - k], flo[k]) if by_hi else (flo[k], fhi[6 - k])
            s += sum(map(mul, outer, [sum(map(mul, inner, row)) for row in rows]))
        return s

    def _compute(self, n: list[int], num: type[Num]) -> OddsResult[Num]:
        c = [n[9] + n[10] + n[11] + n[12], *n[:9]]  # counts per value 0..9
        total = sum(c)
        nl = len(self._lane_keys)
        # per lane: (numerator, denominator) pairs to sum
        parts: list[list[tuple[int, int]]] = [[] for _ in range(nl)]
        if total >= 6:
            den = _falling(total, 6)
            if den >> _LANE_BITS:
                raise ValueError(f"{total} cards: too many for exact odds (at most 1600)")
            s = self._count_lifted(c)
            for i in range(nl):
                parts[i].append(((s >> (i * _LANE_BITS)) & _LANE_MASK, den))
        elif total >= 4:
            f = _multisets().full.weights(_factors(c), total)
            for k in range(4, total + 1):
                s = sum(map(mul, f[k], self._packed[k - 4]))
                den = _falling(total, k)
                for i in range(nl):
                    parts[i].append(((s >> (i * _LANE_BITS)) & _LANE_MASK, den))
        zero = num(0)
        probs: list[Num] = [sum((num(a) / d for a, d in p), zero) for p in parts]

        outcomes: dict[str, Num] = {"player": zero, "banker": zero, "tie": zero}
        for i in self._main_lanes:
            w = self._lane_keys[i][1]
            outcomes[w] = outcomes[w] + probs[i]

        main_p = [probs[i] for i in self._main_lanes]
        pair_p: list[Num] = []
        if any(p.kind == "pair" for p in self._plans.values()):
            pair_p = _pair_cells(n, num) if total >= 6 else _pair_cells_short(n, self.tableau, num)
        mixed_p: list[Num] = []
        if self._mixed_lanes:
            q1, qboth = _zero_pair_chances(n, num)
            for i in self._mixed_lanes:
                _, ps, bs, pp, bp = self._lane_keys[i][:5]
                mixed_p.append(probs[i] * _pair_weight(ps, bs, pp, bp, q1, qboth, num))

        bets: dict[str, BetOdds[Num]] = {}
        for name, plan in self._plans.items():
            p = main_p if plan.kind == "main" else pair_p if plan.kind == "pair" else mixed_p
            ev = zero
            for x, pr in zip(plan.nets, p, strict=True):
                if x:
                    ev = ev + num(x) * pr
            bets[name] = BetOdds(
                win=sum((p[i] for i in plan.win), zero),
                push=sum((p[i] for i in plan.push), zero),
                lose=sum((p[i] for i in plan.lose), zero),
                ev=ev,
            )
        return OddsResult(cards_left=total, outcomes=outcomes, bets=bets)


def _pair_sums(n: Sequence[int]) -> tuple[int, int]:
    """For ranks with counts ``n``: the ordered ways of two cards of one rank
    (cards 1 and 3), and of that together with two more of one rank (cards 2
    and 4), all four distinct cards."""
    s2 = sum(x * (x - 1) for x in n)
    both = s2 * s2 - sum((x * (x - 1)) ** 2 for x in n) + sum(_falling(x, 4) for x in n)
    return s2, both


def _pair_cells(n: Sequence[int], num: type[Num]) -> list[Num]:
    """P(player pair, banker pair) for the four cells of ``_PAIR_CELLS``."""
    total = sum(n)
    if total < 4:
        return [num(0)] * 4
    s2, both = _pair_sums(n)
    den = _falling(total, 4)
    one = s2 * (total - 2) * (total - 3)  # player pair (and, alike, banker pair), any other
    return [num(both) / den, num(one - both) / den, num(one - both) / den, num(den - 2 * one + both) / den]


def _coup_cards(values: Sequence[int], tab: Tableau) -> int:
    """How many cards the coup dealt from the top of ``values`` uses."""
    p1, b1, p2, b2 = values[:4]
    pt, bt = (p1 + p2) % 10, (b1 + b2) % 10
    if pt in tab.natural or bt in tab.natural:
        return 4
    if pt in tab.player_draws_on:
        return 6 if len(values) > 4 and values[4] in tab.banker_draws_when_player_drew[bt] else 5
    return 5 if bt in tab.banker_draws_when_player_stood else 4


def _pair_cells_short(n: Sequence[int], tab: Tableau, num: type[Num]) -> list[Num]:
    """``_pair_cells`` for a shoe of fewer than six cards, where some coups
    cannot be completed: the chance of each pair cell *and* a completed
    coup (a coup the shoe cannot finish is void and settles no bet). Every
    order of the at most five cards is walked (at most 120)."""
    cards = [r for r, x in enumerate(n) for _ in range(x)]  # rank indices (RANKS order)
    if len(cards) < 4:
        return [num(0)] * 4
    value = [(r + 1) % 10 if r < 9 else 0 for r in range(13)]
    ways = [0, 0, 0, 0]
    orders = 0
    for order in itertools.permutations(cards):
        orders += 1
        values = [value[r] for r in order]
        if _coup_cards(values, tab) > len(order):
            continue  # needs a card the shoe does not hold
        cell = _PAIR_CELLS.index((order[0] == order[2], order[1] == order[3]))
        ways[cell] += 1
    return [num(w) / orders for w in ways]


def _zero_pair_chances(n: Sequence[int], num: type[Num]) -> tuple[Num, Num]:
    """Among cards of value 0 (10, J, Q, K): the chance that two of them are
    of one rank, and that two pairs of them are each of one rank."""
    zeros = n[9:]
    n0 = sum(zeros)
    s2, both = _pair_sums(zeros)
    q1 = num(s2) / _falling(n0, 2) if n0 >= 2 else num(0)
    qboth = num(both) / _falling(n0, 4) if n0 >= 4 else num(0)
    return q1, qboth


def _pair_weight(ps: int, bs: int, pp: bool, bp: bool, q1: Num, qboth: Num, num: type[Num]) -> Num:
    """Chance of the pair facts (pp, bp) in a cell of pair status (ps, bs)."""
    if ps == 2 and bs == 2:
        if pp and bp:
            return qboth
        if pp or bp:
            return q1 - qboth
        return 1 - 2 * q1 + qboth
    one = num(1)
    w = one
    if ps == 2:
        w = q1 if pp else one - q1
    if bs == 2:
        w = q1 if bp else one - q1
    return w


@functools.lru_cache(maxsize=32)
def _calculator(
    key: tuple[tuple[str, tuple[tuple[Condition, Fraction], ...]], ...], tableau: Tableau
) -> OddsCalculator:
    return OddsCalculator(dict(key), tableau)


@overload
def odds_for(
    counts: Mapping[str, int] | Sequence[int],
    bets: BetTable,
    tableau: Tableau = ...,
    exact: Literal[False] = ...,
) -> OddsResult[float]: ...
@overload
def odds_for(
    counts: Mapping[str, int] | Sequence[int],
    bets: BetTable,
    tableau: Tableau = ...,
    *,
    exact: Literal[True],
) -> OddsResult[Fraction]: ...


def odds_for(
    counts: Mapping[str, int] | Sequence[int],
    bets: BetTable,
    tableau: Tableau = STANDARD_TABLEAU,
    exact: bool = False,
) -> OddsResult[float] | OddsResult[Fraction]:
    """Odds of every bet in ``bets`` for a shoe holding ``counts`` (rank ->
    count, or 13 counts in ``RANKS`` order). The compiled bet table is cached;
    a caller that updates often may hold an :class:`OddsCalculator` itself."""
    key = tuple((name, tuple((cond, Fraction(pays)) for cond, pays in rules)) for name, rules in bets.items())
    return _calculator(key, tableau).compute(counts, exact)


def value_counts(counts: Mapping[str, int] | Sequence[int]) -> list[int]:
    """Counts per point value 0..9 (10/J/Q/K merged) of rank counts."""
    n = _as_rank_counts(counts)
    return [n[9] + n[10] + n[11] + n[12], *n[:9]]
