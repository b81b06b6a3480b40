"""Live odds: the time of one full update (every bet of a profile, exact
for the remaining composition, float results) after each coup of dealt
8-deck shoes.

Shoes are shuffled and dealt with ``random.Random(1)`` by the standard
tableau down to a 14-card cut; after each coup its cards leave the
composition and the update is timed (``OddsCalculator.compute``, compiled
once per profile beforehand, as the engine holds it). Median and p99 over
every coup of ``SHOES`` shoes, per profile."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from controller.odds import OddsCalculator, from_profile
from controller.rules import load_profile

SHOES = 10
DECKS = 8
CUT = 14
PROFILES = ("punto_banco", "ez_baccarat", "baccarat_27")
TARGET_MS = 2.0


def _coup(shoe: list[int], at: int) -> int:
    """Deal one coup of rank indices (0 = A .. 12 = K) from ``shoe[at:]`` by
    the standard tableau; returns how many cards it took."""
    value = [(r + 1) % 10 if r < 9 else 0 for r in shoe[at : at + 6]]
    p = (value[0] + value[2]) % 10
    b = (value[1] + value[3]) % 10
    if p >= 8 or b >= 8:
        return 4
    if p <= 5:
        p3 = value[4]
        draws = (
            b <= 2
            or (b == 3 and p3 != 8)
            or (b == 4 and 2 <= p3 <= 7)
            or (b == 5 and 4 <= p3 <= 7)
            or (b == 6 and p3 in (6, 7))
        )
        return 6 if draws else 5
    return 5 if b <= 5 else 4


def update_times(profile: str, shoes: int = SHOES, seed: int = 1) -> tuple[list[float], float]:
    """Seconds per update over every coup of ``shoes`` shoes, and the
    one-off compile time of the profile's bet table."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    calc = OddsCalculator(*from_profile(load_profile(profile)))
    compile_s = time.perf_counter() - t0
    times: list[float] = []
    for _ in range(shoes):
        shoe = [r for r in range(13) for _ in range(4 * DECKS)]
        rng.shuffle(shoe)
        counts = [4 * DECKS] * 13
        at = 0
        while len(shoe) - at > CUT:
            n = _coup(shoe, at)
            for r in shoe[at : at + n]:
                counts[r] -= 1
            at += n
            t = time.perf_counter()
            calc.compute(counts)
            times.append(time.perf_counter() - t)
    return times, compile_s


def _p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98]


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for profile in PROFILES:
        times, compile_s = update_times(profile)
        ms = [t * 1000 for t in times]
        note = (
            f"{len(ms)} updates over {SHOES} dealt {DECKS}-deck shoes; "
            f"bet table compiled once in {compile_s:.2f} s"
        )
        rows.append(
            {
                "name": f"odds update, {profile}, median",
                "value": statistics.median(ms),
                "unit": "ms",
                "target": f"<= {TARGET_MS}",
                "note": note,
            }
        )
        rows.append(
            {
                "name": f"odds update, {profile}, p99",
                "value": _p99(ms),
                "unit": "ms",
                "target": f"<= {TARGET_MS}",
                "note": note,
            }
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']}: {row['value']:.3f} {row['unit']} (target {row['target']}; {row['note']})")
