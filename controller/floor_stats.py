"""Floor statistics: a table's results against its profile's exact odds.

Pure functions, no I/O (``controller.commands.report`` feeds them what it
reads from the archive):

* :func:`theory`: for a profile and a number of decks, the exact
  probability of Player / Banker / Tie and, for every bet, of a *hit*
  (net > 0), the expected net per unit (``ev``; the theoretical hold per
  unit staked is ``-ev``) and the standard deviation of the net per unit.
  All from a full shoe ("off the top"), by :mod:`controller.odds`, which
  counts every coup the tableau allows exactly.
* :func:`chi_square` with :func:`chi2_sf`: Pearson's test of observed
  counts against expected ones, its p-value from the regularized upper
  incomplete gamma function (no scipy).
* :func:`evaluate`: one table over one period: the Banker/Player/Tie test
  (2 degrees of freedom), one test per side bet the profile offers (hit
  vs not, 1 degree of freedom), a flag for each test whose p is below
  ``alpha``, and the theoretical and observed hold of every bet.

What the expectations assume, said once here and in docs/archive.md:

* Each settled, non-demo coup's result is drawn with the full-shoe
  probabilities. Within a shoe, coups are dealt without replacement and are
  weakly dependent, and the later coups of a shoe have slightly different
  odds; averaged over a shoe the difference is of the order of 1e-4 in a
  probability, far below what a shift (or a year: about 4e5 coups, a
  standard error of 5e-4 on the tie rate) can resolve. A table whose
  composition is wrong (missing or extra cards) is exactly what the test
  should catch.
* A test is only flagged when every expected count is at least 5
  (Cochran's rule for the chi-square approximation); below that it is
  reported with ``low_expected`` and never flagged.
* Many tests make false alarms: a fair table fails a test at level
  ``alpha`` with probability ``alpha``; a report of ``m`` tests on fair
  tables raises about ``m * alpha`` false flags (at least one with
  probability ``1 - (1 - alpha)^m``). :func:`expected_false_flags` says it;
  a caller who wants a family-wise rate ``a`` uses ``alpha = a / m``
  (Bonferroni).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from controller.errors import ExpectedError
from controller.odds import Condition, OddsCalculator, from_profile, rank_counts
from controller.rules import load_profile

__all__ = [
    "DEFAULT_ALPHA",
    "MAIN_BETS",
    "BetTheory",
    "ChiSquare",
    "Evaluation",
    "GroupCounts",
    "Hold",
    "Theory",
    "chi2_sf",
    "chi_square",
    "evaluate",
    "expected_false_flags",
    "gammaincc",
    "theory",
]

#: A table is flagged when a test's p-value is below this (one fair table
#: in a thousand per test).
DEFAULT_ALPHA = 0.001
#: Cochran's rule: the chi-square approximation needs every expected count
#: at least this large; smaller samples are reported, never flagged.
MIN_EXPECTED = 5.0
WINNERS = ("banker", "player", "tie")
#: The bets on the winner; every other bet of a profile is a side bet whose
#: hits are tested on their own.
MAIN_BETS = frozenset(WINNERS)


# --- the p-value: regularized incomplete gamma function ---------------------------

_EPS = 1e-15
_MAX_ITER = 10_000
_TINY = 1e-300


def gammaincc(a: float, x: float) -> float:
    """The regularized upper incomplete gamma function
    ``Q(a, x) = Γ(a, x) / Γ(a) = 1 - P(a, x)``, for ``a > 0``, ``x >= 0``.

    As in Numerical Recipes (Press et al., 3rd ed., section 6.2, ``gammq``):
    for ``x < a + 1`` the series (Abramowitz & Stegun 6.5.29)
    ``P(a, x) = e^-x x^a / Γ(a + 1) * Σ_n x^n / ((a + 1)(a + 2)...(a + n))``
    and ``Q = 1 - P``; otherwise the continued fraction (A&S 6.5.31)
    ``Q(a, x) = e^-x x^a / Γ(a) * 1/(x + 1 - a - 1(1 - a)/(x + 3 - a - 2(2 - a)/(x + 5 - a - ...)))``
    evaluated by the modified Lentz method. The prefactor is computed in
    logarithms, so a p-value of 1e-200 is still a number, not 0.
    """
    if not a > 0 or math.isinf(a):
        raise ValueError(f"gammaincc needs a > 0, not {a}")
    if math.isnan(x) or x < 0:
        raise ValueError(f"gammaincc needs x >= 0, not {x}")
    if x == 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(_MAX_ITER):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        p = total * math.exp(log_prefix)
        return max(0.0, 1.0 - p)
    b = x + 1 - a
    c = 1 / _TINY
    d = 1 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < _EPS:
            break
    return min(1.0, math.exp(log_prefix) * h)


def chi2_sf(statistic: float, df: int) -> float:
    """P(X >= statistic) for X chi-square with ``df`` degrees of freedom:
    ``Q(df / 2, statistic / 2)``."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    return gammaincc(df / 2, max(0.0, statistic) / 2)


@dataclass(frozen=True, slots=True)
class ChiSquare:
    """Pearson's test of ``observed`` against ``expected`` counts (same keys)."""

    observed: dict[str, int]
    expected: dict[str, float]
    statistic: float
    df: int
    p: float
    #: some expected count is below MIN_EXPECTED: the p-value is only
    #: indicative and the test never flags.
    low_expected: bool
    flagged: bool


def chi_square(observed: Mapping[str, int], expected: Mapping[str, float], alpha: float) -> ChiSquare:
    """Pearson's chi-square over the categories of ``expected`` (``df`` =
    categories - 1; the probabilities are given, none estimated)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    if len(expected) < 2:
        raise ValueError("a chi-square test needs at least two categories")
    stat = 0.0
    for k, e in expected.items():
        o = observed.get(k, 0)
        if e > 0:
            stat += (o - e) ** 2 / e
        elif o > 0:
            stat = math.inf  # an impossible outcome happened
    df = len(expected) - 1
    p = chi2_sf(stat, df) if math.isfinite(stat) else 0.0
    low = min(expected.values()) < MIN_EXPECTED
    return ChiSquare(
        observed={k: int(observed.get(k, 0)) for k in expected},
        expected=dict(expected),
        statistic=stat,
        df=df,
        p=p,
        low_expected=low,
        flagged=not low and p < alpha,
    )


def expected_false_flags(tests: int, alpha: float) -> tuple[float, float]:
    """For ``tests`` independent tests of fair tables at level ``alpha``:
    the expected number of false flags and the chance of at least one."""
    return tests * alpha, 1.0 - (1.0 - alpha) ** tests


# --- the profile's exact odds ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BetTheory:
    #: P(net > 0): the bet is paid (for a side bet, a "hit").
    hit: Fraction
    push: Fraction
    lose: Fraction
    #: expected net per unit staked; the theoretical hold is ``-ev``.
    ev: Fraction
    #: standard deviation of the net per unit staked on one coup.
    sd: float

    @property
    def hold(self) -> Fraction:
        return -self.ev


@dataclass(frozen=True, slots=True)
class Theory:
    profile: str
    decks: int
    outcomes: dict[str, Fraction]  # banker, player, tie
    bets: dict[str, BetTheory]

    @property
    def side_bets(self) -> tuple[str, ...]:
        return tuple(b for b in self.bets if b not in MAIN_BETS)


@functools.lru_cache(maxsize=64)
def theory(profile: str, decks: int) -> Theory:
    """The exact full-shoe odds of every bet of ``profile`` (a shipped name
    or a path, as :func:`controller.rules.load_profile` takes) with
    ``decks`` decks. Raises ConfigError for an unknown or bad profile and
    ValueError for a number of decks out of 1..12."""
    if not 1 <= decks <= 12:
        raise ValueError(f"decks must be 1..12, not {decks}")
    prof = load_profile(profile)
    bets, tableau = from_profile(prof)
    counts = rank_counts(decks)
    odds = OddsCalculator(bets, tableau).compute(counts, exact=True)
    # E[net^2] is the ev of the same bet paying net^2 (a loss pays 1); the
    # catch-all keeps a bet with no matching rule at (-1)^2 = 1.
    squared = {
        name: [*((cond, pays * pays) for cond, pays in rules), (Condition(), Fraction(1))]
        for name, rules in bets.items()
    }
    second = OddsCalculator(squared, tableau).compute(counts, exact=True)
    out: dict[str, BetTheory] = {}
    for name, b in odds.bets.items():
        var = second.bets[name].ev - b.ev * b.ev
        out[name] = BetTheory(hit=b.win, push=b.push, lose=b.lose, ev=b.ev, sd=math.sqrt(float(var)))
    return Theory(profile=prof.name, decks=decks, outcomes=dict(odds.outcomes), bets=out)


# --- one table over one period ------------------------------------------------------


@dataclass(slots=True)
class GroupCounts:
    """What the archive says about the settled, non-demo coups of one table
    in one period dealt under one (profile, decks): an aggregate, so a year
    of coups is a handful of these."""

    profile: str
    decks: int
    coups: int = 0
    winners: dict[str, int] = field(default_factory=dict)
    #: per bet: coups whose settlement carries the bet, how many paid it
    #: (net > 0) and the sum of its net per unit.
    settled: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    net: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hold:
    """Hold per unit staked on a bet: what the house keeps of a unit staked
    on it on every settled coup (the archive knows no wagers, so this is
    the game's hold, not the table's drop)."""

    coups: int
    theoretical: float
    observed: float | None
    #: standard error of the observed hold if the table is fair
    #: (``sd / sqrt(coups)``): a difference of 2-3 of these is noise.
    stderr: float | None


@dataclass(frozen=True, slots=True)
class Evaluation:
    coups: int
    main: ChiSquare | None
    side: dict[str, ChiSquare]
    hold: dict[str, Hold]
    #: (profile, decks) whose odds could not be computed (an unknown
    #: profile), with the reason; their coups are left out of the tests.
    unknown: dict[str, str]

    @property
    def tests(self) -> int:
        return (self.main is not None) + len(self.side)

    @property
    def flagged(self) -> bool:
        return (self.main is not None and self.main.flagged) or any(t.flagged for t in self.side.values())


def evaluate(groups: Sequence[GroupCounts], alpha: float = DEFAULT_ALPHA) -> Evaluation:
    """Test one table's period (its coups, possibly under several profiles
    or deck counts: expected counts are the sum over the groups) against
    the exact odds, and give every bet's theoretical and observed hold."""
    exp_w = dict.fromkeys(WINNERS, 0.0)
    obs_w = dict.fromkeys(WINNERS, 0)
    coups = 0
    side_exp: dict[str, float] = {}
    side_n: dict[str, int] = {}
    side_obs: dict[str, int] = {}
    hold_n: dict[str, int] = {}
    hold_theory: dict[str, float] = {}  # sum over coups of the bet's theoretical hold
    hold_var: dict[str, float] = {}  # sum over coups of the bet's variance
    hold_net: dict[str, float] = {}
    unknown: dict[str, str] = {}
    for g in groups:
        if g.coups <= 0:
            continue
        try:
            th = theory(g.profile, g.decks)
        except (ValueError, ExpectedError) as exc:  # a profile the archive names but this box lacks
            unknown[f"{g.profile}/{g.decks}"] = str(exc)
            continue
        coups += g.coups
        for w in WINNERS:
            exp_w[w] += g.coups * float(th.outcomes[w])
            obs_w[w] += g.winners.get(w, 0)
        for bet, bt in th.bets.items():
            n = g.settled.get(bet, 0)
            if n <= 0:
                continue
            hold_n[bet] = hold_n.get(bet, 0) + n
            hold_theory[bet] = hold_theory.get(bet, 0.0) + n * float(bt.hold)
            hold_var[bet] = hold_var.get(bet, 0.0) + n * bt.sd * bt.sd
            hold_net[bet] = hold_net.get(bet, 0.0) + g.net.get(bet, 0.0)
            if bet not in MAIN_BETS:
                side_n[bet] = side_n.get(bet, 0) + n
                side_exp[bet] = side_exp.get(bet, 0.0) + n * float(bt.hit)
                side_obs[bet] = side_obs.get(bet, 0) + g.hits.get(bet, 0)
    main = chi_square(obs_w, exp_w, alpha) if coups else None
    side = {
        bet: chi_square(
            {"hit": side_obs[bet], "miss": side_n[bet] - side_obs[bet]},
            {"hit": side_exp[bet], "miss": side_n[bet] - side_exp[bet]},
            alpha,
        )
        for bet in side_n
    }
    hold = {
        bet: Hold(
            coups=n,
            theoretical=hold_theory[bet] / n,
            observed=-hold_net[bet] / n,
            stderr=math.sqrt(hold_var[bet]) / n,
        )
        for bet, n in hold_n.items()
    }
    return Evaluation(coups=coups, main=main, side=side, hold=hold, unknown=unknown)
