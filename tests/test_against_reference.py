"""The engine against a separate, minimal reference dealer written here.

Random shoes (any seed, 1, 6 and 8 decks, all three profiles) are dealt by
the reference dealer below, which knows the rules only as docs/dealing-errors.md states
them, in plain code. The same cards go to the engine as frames; every coup
must agree: cards per hand, totals, winner, pairs, natural, tags, and the
settlement of every bet.
"""

from __future__ import annotations

import random
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.engine import Engine
from controller.rules import load_profile
from firmware_protocols.frames import Button, Card, Hello

RANKS = "A23456789TJQK"


def val(card: str) -> int:
    i = RANKS.index(card[0]) + 1
    return i if i < 10 else 0


def burn_value(card: str) -> int:
    i = RANKS.index(card[0]) + 1
    return min(i, 10)


def banker_draws(b: int, p3: int | None) -> bool:
    if p3 is None:
        return b <= 5
    if b <= 2:
        return True
    if b == 3:
        return p3 != 8
    if b == 4:
        return 2 <= p3 <= 7
    if b == 5:
        return 4 <= p3 <= 7
    if b == 6:
        return p3 in (6, 7)
    return False


def deal_coup(shoe: list[str]) -> tuple[list[str], list[str]] | None:
    """Deal one coup from the front of ``shoe`` (consumed); None if it might run out."""
    if len(shoe) < 6:
        return None
    p = [shoe.pop(0)]
    b = [shoe.pop(0)]
    p.append(shoe.pop(0))
    b.append(shoe.pop(0))
    pt = (val(p[0]) + val(p[1])) % 10
    bt = (val(b[0]) + val(b[1])) % 10
    if pt >= 8 or bt >= 8:
        return p, b
    p3 = None
    if pt <= 5:
        p.append(shoe.pop(0))
        p3 = val(p[2])
    if banker_draws(bt, p3):
        b.append(shoe.pop(0))
    return p, b


def reference_settlement(profile: str, p: list[str], b: list[str]) -> dict[str, Fraction]:
    pt = sum(val(c) for c in p) % 10
    bt = sum(val(c) for c in b) % 10
    win = "player" if pt > bt else "banker" if bt > pt else "tie"
    ppair = p[0][0] == p[1][0]
    bpair = b[0][0] == b[1][0]
    s: dict[str, Fraction] = {}
    s["player"] = Fraction(1) if win == "player" else Fraction(0) if win == "tie" else Fraction(-1)
    if profile == "punto_banco":
        s["banker"] = Fraction(19, 20) if win == "banker" else Fraction(0) if win == "tie" else Fraction(-1)
    elif profile == "ez_baccarat":
        if win == "banker":
            s["banker"] = Fraction(0) if (bt == 7 and len(b) == 3) else Fraction(1)
        else:
            s["banker"] = Fraction(0) if win == "tie" else Fraction(-1)
    else:  # baccarat_27
        if win == "banker":
            s["banker"] = Fraction(2) if bt == 2 else Fraction(1, 2) if bt == 7 else Fraction(1)
        else:
            s["banker"] = Fraction(0) if win == "tie" else Fraction(-1)
    s["tie"] = Fraction(8) if win == "tie" else Fraction(-1)
    if profile in ("punto_banco", "baccarat_27"):
        s["player_pair"] = Fraction(11) if ppair else Fraction(-1)
        s["banker_pair"] = Fraction(11) if bpair else Fraction(-1)
    if profile == "ez_baccarat":
        s["dragon7"] = Fraction(40) if (win == "banker" and bt == 7 and len(b) == 3) else Fraction(-1)
        s["panda8"] = Fraction(25) if (win == "player" and pt == 8 and len(p) == 3) else Fraction(-1)
    if profile == "baccarat_27":
        s["b27"] = Fraction(8) if (win == "banker" and bt in (2, 7)) else Fraction(-1)
    return s


def play(profile: str, decks: int, seed: int) -> None:
    rng = random.Random(seed)
    shoe = [r + s for s in "SHDC" for r in RANKS for _ in range(decks)]
    rng.shuffle(shoe)
    engine = Engine("T01", load_profile(profile), decks)
    t = 1_763_800_000.0
    seq = 0
    events = []

    def feed(frame_cls: type, **kw: object) -> None:
        nonlocal t, seq
        t += 0.25
        seq += 1
        events.extend(engine.feed(frame_cls(t=t, seq=seq, **kw)))

    feed(Hello, model="REF", firmware="1", serial="1")
    seq = 0
    feed(Button, name="NEWSHOE")
    first = shoe.pop(0)
    feed(Card, card=first)
    for _ in range(burn_value(first)):
        feed(Card, card=shoe.pop(0))
    expected = []
    while True:
        coup = deal_coup(shoe)
        if coup is None:
            break
        p, b = coup
        for c in [p[0], b[0], p[1], b[1], *p[2:], *b[2:]]:
            feed(Card, card=c)
        feed(Button, name="RESULT")
        expected.append((p, b))

    results = [e for e in events if e["type"] == "coup.result"]
    assert not [e for e in events if e["type"] in ("misdeal", "coup.void", "security.alert")]
    assert len(results) == len(expected)
    for ev, (p, b) in zip(results, expected, strict=True):
        pt = sum(val(c) for c in p) % 10
        bt = sum(val(c) for c in b) % 10
        assert ev["player"] == {"cards": p, "total": pt}
        assert ev["banker"] == {"cards": b, "total": bt}
        assert ev["winner"] == ("player" if pt > bt else "banker" if bt > pt else "tie")
        assert ev["natural"] == (len(p) == 2 and len(b) == 2 and (pt >= 8 or bt >= 8))
        assert ev["player_pair"] == (p[0][0] == p[1][0])
        assert ev["banker_pair"] == (b[0][0] == b[1][0])
        want = reference_settlement(profile, p, b)
        got = {k: Fraction(str(v)) for k, v in ev["settlement"].items()}
        assert got == want, (p, b)
        tags = []
        if ev["winner"] == "banker" and bt == 2:
            tags.append("banker2")
        if ev["winner"] == "banker" and bt == 7:
            tags.append("banker7")
            if len(b) == 3:
                tags.append("dragon7")
        if ev["winner"] == "player" and pt == 8 and len(p) == 3:
            tags.append("panda8")
        assert ev["tags"] == sorted(tags)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    profile=st.sampled_from(["punto_banco", "ez_baccarat", "baccarat_27"]),
    decks=st.sampled_from([1, 6, 8]),
    seed=st.integers(0, 2**32 - 1),
)
def test_engine_agrees_with_reference_dealer_on_every_coup(profile: str, decks: int, seed: int) -> None:
    play(profile, decks, seed)


def test_every_profile_and_deck_count_is_covered() -> None:
    # hypothesis samples the grid; this pins every combination at least once
    for profile in ("punto_banco", "ez_baccarat", "baccarat_27"):
        for decks in (1, 6, 8):
            play(profile, decks, seed=decks * 1000 + len(profile))
