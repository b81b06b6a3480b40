"""controller.floor_stats: the p-value function against closed forms and
published critical values, the profiles' exact odds against published house
edges, and the tests and holds on hand-computed and simulated counts."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from controller.floor_stats import (
    GroupCounts,
    chi2_sf,
    chi_square,
    evaluate,
    expected_false_flags,
    gammaincc,
    theory,
)
from controller.rules import load_profile, outcome_of

# --- the regularized upper incomplete gamma function ---------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 30])
@pytest.mark.parametrize("x", [0.01, 0.5, 1.0, 2.9, 7.5, 25.0, 60.0])
def test_gammaincc_integer_a_is_the_poisson_tail(n: int, x: float) -> None:
    # Q(n, x) = e^-x sum_{k<n} x^k / k!  (both the series and the continued
    # fraction branch are crossed: x < n + 1 and x >= n + 1)
    want = math.exp(-x) * sum(x**k / math.factorial(k) for k in range(n))
    assert gammaincc(n, x) == pytest.approx(want, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("x", [1e-6, 0.1, 0.7, 1.5, 4.0, 12.0, 40.0])
def test_gammaincc_half_integer_a_is_erfc(x: float) -> None:
    assert gammaincc(0.5, x) == pytest.approx(math.erfc(math.sqrt(x)), rel=1e-12)
    want = math.erfc(math.sqrt(x)) + 2 * math.sqrt(x / math.pi) * math.exp(-x)
    assert gammaincc(1.5, x) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(
    ("statistic", "df", "p"),
    [
        # upper critical values of the chi-square distribution, NIST/SEMATECH
        # e-Handbook of Statistical Methods, section 1.3.6.7.4
        (3.841, 1, 0.05),
        (6.635, 1, 0.01),
        (10.828, 1, 0.001),
        (5.991, 2, 0.05),
        (13.816, 2, 0.001),
        (7.815, 3, 0.05),
        (18.307, 10, 0.05),
        (29.588, 10, 0.001),
        (124.342, 100, 0.05),
        (0.004, 1, 0.95),
        (0.103, 2, 0.95),
    ],
)
def test_chi2_sf_matches_published_critical_values(statistic: float, df: int, p: float) -> None:
    # the table gives 3 decimals of the statistic: p to about 1e-3 relative
    assert chi2_sf(statistic, df) == pytest.approx(p, rel=2e-3)


def test_chi2_sf_far_tail_is_a_number_not_zero() -> None:
    # df = 2: Q(1, x/2) = exp(-x/2) exactly, even at 1e-200
    assert chi2_sf(921.0, 2) == pytest.approx(math.exp(-460.5), rel=1e-10)
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(math.inf, 1) == 0.0


@pytest.mark.parametrize(("a", "x"), [(0.0, 1.0), (-1.0, 1.0), (1.0, -0.1), (1.0, math.nan), (math.inf, 1)])
def test_gammaincc_refuses_arguments_outside_its_domain(a: float, x: float) -> None:
    with pytest.raises(ValueError):
        gammaincc(a, x)


def test_chi2_sf_refuses_zero_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        chi2_sf(1.0, 0)


# --- the profiles' exact odds -------------------------------------------------------


def test_punto_banco_eight_decks_matches_published_house_edges() -> None:
    # Wizard of Odds, "Baccarat": 8 decks, Banker 1.0579%, Player 1.2351%,
    # Tie 8:1 14.3596%, Player/Banker pair 11:1 10.3614%
    th = theory("punto_banco", 8)
    assert sum(th.outcomes.values()) == 1
    assert float(th.bets["banker"].hold) == pytest.approx(0.010579, abs=5e-7)
    assert float(th.bets["player"].hold) == pytest.approx(0.012351, abs=5e-7)
    assert float(th.bets["tie"].hold) == pytest.approx(0.143596, abs=5e-7)
    assert float(th.bets["player_pair"].hold) == pytest.approx(0.103614, abs=5e-7)
    assert th.side_bets == ("player_pair", "banker_pair")
    # a pair is two cards of one rank among 416: 31/415
    assert th.bets["player_pair"].hit == Fraction(31, 415)


def test_ez_baccarat_side_bets_match_published_odds() -> None:
    # Wizard of Odds, "EZ Baccarat": Dragon 7 at 40:1 7.6113%, Panda 8 at
    # 25:1 10.1876%; the Banker bet (push on a three-card 7) 1.0183%
    th = theory("ez_baccarat", 8)
    assert th.side_bets == ("dragon7", "panda8")
    assert float(th.bets["dragon7"].hold) == pytest.approx(0.076113, abs=5e-7)
    assert float(th.bets["panda8"].hold) == pytest.approx(0.101876, abs=5e-7)
    assert float(th.bets["banker"].hold) == pytest.approx(0.010183, abs=5e-7)
    # the Banker bet pushes on a tie and on a Dragon 7 (the EZ push)
    assert th.bets["banker"].push == th.outcomes["tie"] + th.bets["dragon7"].hit


def test_bet_standard_deviation_is_that_of_the_net_per_unit() -> None:
    th = theory("punto_banco", 8)
    t = th.bets["tie"]
    p = th.outcomes["tie"]
    want = math.sqrt(float(64 * p + (1 - p) - (9 * p - 1) ** 2))
    assert t.sd == pytest.approx(want, rel=1e-12)
    b = th.bets["banker"]
    pb, pp = th.outcomes["banker"], th.outcomes["player"]
    second = Fraction(361, 400) * pb + pp
    assert b.sd == pytest.approx(math.sqrt(float(second - b.ev**2)), rel=1e-12)


def test_theory_refuses_decks_out_of_range() -> None:
    with pytest.raises(ValueError, match="decks"):
        theory("punto_banco", 13)


# --- chi-square and the evaluation --------------------------------------------------


def test_chi_square_by_hand() -> None:
    # (60-50)^2/50 + (40-50)^2/50 = 4, 1 df: p = erfc(sqrt(2))
    t = chi_square({"a": 60, "b": 40}, {"a": 50.0, "b": 50.0}, alpha=0.05)
    assert t.statistic == pytest.approx(4.0)
    assert t.df == 1
    assert t.p == pytest.approx(math.erfc(math.sqrt(2)), rel=1e-12)
    assert t.flagged and not t.low_expected
    assert not chi_square({"a": 60, "b": 40}, {"a": 50.0, "b": 50.0}, alpha=0.01).flagged


def test_chi_square_never_flags_when_an_expected_count_is_below_five() -> None:
    t = chi_square({"hit": 4, "miss": 0}, {"hit": 0.4, "miss": 3.6}, alpha=0.001)
    assert t.p < 0.001 and t.low_expected and not t.flagged


def test_chi_square_an_impossible_outcome_has_p_zero() -> None:
    t = chi_square({"a": 1, "b": 9}, {"a": 0.0, "b": 10.0}, alpha=0.001)
    assert t.statistic == math.inf and t.p == 0.0


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1])
def test_chi_square_refuses_alpha_out_of_range(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        chi_square({"a": 1, "b": 1}, {"a": 1.0, "b": 1.0}, alpha)


def test_expected_false_flags() -> None:
    n, p = expected_false_flags(12_000, 0.001)
    assert n == pytest.approx(12.0)
    assert p == pytest.approx(1 - 0.999**12_000)


def _deal(
    profile: str,
    decks: int,
    coups: int,
    seed: int,
    doctor: dict[int, int] | None = None,
    without: str = "",
) -> GroupCounts:
    """Shoes shuffled by ``random`` and dealt by the tableau (the fake
    shoe's rules) until ``coups`` coups; ``doctor`` adds spades of the given
    values (0..9) to every shoe and ``without`` takes out the given ranks:
    a doctored shoe."""
    from drivers.fake import banker_draws

    prof = load_profile(profile)
    rng = random.Random(seed)
    values = [min(v, 10) % 10 for v in range(1, 14)]
    g = GroupCounts(profile=profile, decks=decks)
    suits = "SHDC"
    ranks = "A23456789TJQK"
    while g.coups < coups:
        shoe = [r + s for r in ranks for s in suits for _ in range(decks) if r not in without]
        for v, n in (doctor or {}).items():
            shoe += [ranks[values.index(v)] + "S"] * n
        rng.shuffle(shoe)
        while len(shoe) > 14 and g.coups < coups:
            val = lambda c: values[ranks.index(c[0])]  # noqa: E731
            p, b = [shoe.pop(), shoe.pop()], [shoe.pop(), shoe.pop()]
            p[1], b[0] = b[0], p[1]  # dealt P1 B1 P2 B2
            pt = (val(p[0]) + val(p[1])) % 10
            bt = (val(b[0]) + val(b[1])) % 10
            p3 = None
            if pt < 8 and bt < 8:
                if pt <= 5:
                    p.append(shoe.pop())
                    p3 = val(p[2])
                if (p3 is None and bt <= 5) or (p3 is not None and banker_draws(bt, p3)):
                    b.append(shoe.pop())
            pv, bv = [val(c) for c in p], [val(c) for c in b]
            natural = (sum(pv[:2]) % 10) >= 8 or (sum(bv[:2]) % 10) >= 8
            out = outcome_of(pv, bv, p[0][0] == p[1][0], b[0][0] == b[1][0], natural)
            g.coups += 1
            g.winners[out["winner"]] = g.winners.get(out["winner"], 0) + 1
            for bet, pays in prof.settle(out).items():
                g.settled[bet] = g.settled.get(bet, 0) + 1
                g.hits[bet] = g.hits.get(bet, 0) + (pays > 0)
                g.net[bet] = g.net.get(bet, 0.0) + float(pays)
    return g


def test_a_fair_simulated_table_is_not_flagged_and_its_hold_is_near_theory() -> None:
    ev = evaluate([_deal("punto_banco", 8, 20_000, seed=7)])
    assert ev.coups == 20_000 and ev.tests == 3
    assert ev.main is not None and ev.main.p > 0.001 and not ev.flagged
    for bet, h in ev.hold.items():
        assert h.observed is not None and h.stderr is not None
        assert abs(h.observed - h.theoretical) < 4 * h.stderr, bet


def test_a_shoe_without_its_eights_and_nines_is_flagged_on_banker_player_tie() -> None:
    # no 8s or 9s: ties 1.3 points more likely, Banker 0.8 less
    ev = evaluate([_deal("punto_banco", 8, 20_000, seed=7, without="89")])
    assert ev.main is not None and ev.main.flagged, ev.main
    assert ev.main.observed["tie"] > ev.main.expected["tie"]
    assert ev.flagged


def test_a_shoe_with_extra_nines_of_spades_is_flagged_on_the_pair_bets() -> None:
    # 96 extra 9S in 8 decks: far more pairs than 31/415
    ev = evaluate([_deal("punto_banco", 8, 5_000, seed=3, doctor={9: 96})])
    assert ev.side["player_pair"].flagged and ev.side["banker_pair"].flagged
    assert ev.hold["player_pair"].observed is not None
    assert ev.hold["player_pair"].observed < ev.hold["player_pair"].theoretical


def test_evaluate_sums_expectations_over_profiles_and_decks() -> None:
    a = GroupCounts("punto_banco", 8, coups=100, winners={"banker": 50, "player": 40, "tie": 10})
    b = GroupCounts("ez_baccarat", 6, coups=50, winners={"banker": 20, "player": 25, "tie": 5})
    a.settled = {"banker": 100, "player_pair": 100}
    a.net = {"banker": 50 * 0.95 - 40, "player_pair": 12 * 7 - 100}
    a.hits = {"player_pair": 7, "banker": 50}
    ev = evaluate([a, b])
    ta, tb = theory("punto_banco", 8), theory("ez_baccarat", 6)
    assert ev.coups == 150
    assert ev.main is not None
    assert ev.main.expected["tie"] == pytest.approx(
        100 * float(ta.outcomes["tie"]) + 50 * float(tb.outcomes["tie"])
    )
    assert ev.main.observed == {"banker": 70, "player": 65, "tie": 15}
    assert set(ev.side) == {"player_pair"}  # b offered no side bet settled
    assert ev.side["player_pair"].expected["hit"] == pytest.approx(100 * 31 / 415)
    assert ev.hold["banker"].observed == pytest.approx(-(50 * 0.95 - 40) / 100)
    assert ev.hold["banker"].theoretical == pytest.approx(float(ta.bets["banker"].hold))


def test_evaluate_sets_aside_an_unknown_profile() -> None:
    ev = evaluate([GroupCounts("no_such_profile", 8, coups=10, winners={"banker": 10})])
    assert ev.coups == 0 and ev.main is None
    assert "no_such_profile/8" in ev.unknown
