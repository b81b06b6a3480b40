"""Replay throughput: a 100-shoe capture through decoder, engine and JSON
serialisation, events written to /dev/null. Median of 5 runs, in cards per
second, beside the cost of only reading and parsing the capture's records
(the floor any replay pays) and beside a deliberately straightforward
replayer (:mod:`benchmarks.baseline_replay`: parse, checksum, tableau, one
``json.dumps`` per card and per coup) on the same capture, the runs
interleaved so that both see the same load on a shared machine; the ratio
is project / baseline (goal: >= 1.5). Times are the process's CPU time
(``time.process_time``): the replay is single-threaded and CPU-bound, so
on an idle machine this is its wall time, and on the shared build box the
other processes' share of the cores does not count as ours."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import baseline_replay
from controller.events import dumps
from controller.replay import replay_events
from controller.shoelog import Record, ShoelogWriter, read_shoelog
from drivers.fake import FakeShoe

SHOES = 100
RUNS = 7


def make_capture(path: Path, shoes: int = SHOES, seed: int = 1, faults: str | None = None) -> None:
    """Writes ``shoes`` fake 8-deck shoes as a capture (with the fake's
    ``faults``, for tests; the benchmark's capture has none)."""
    fake = FakeShoe(seed=seed, decks=8, shoes=shoes, cards_per_second=2, faults=faults)
    with open(path, "w", encoding="utf-8") as fh:
        w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T01"})
        for t, data in fake.stream():
            w.write(t, "<", data)


def _replay(path: Path) -> int:
    n = 0
    with open("/dev/null", "w") as out:
        for ev in replay_events(path):
            out.write(dumps(ev))
            out.write("\n")
            n += ev["type"] == "card"
    return n


def _baseline(path: Path) -> int:
    with open("/dev/null", "w") as out:
        return len(baseline_replay.replay(str(path), out.write))


def _parse_only(path: Path) -> int:
    return sum(1 for r in read_shoelog(path) if isinstance(r, Record))


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "100shoes.shoelog"
        make_capture(path)
        cards = _replay(path)
        _baseline(path)  # fails here, before any timing, on a capture it cannot replay
        times, floor, base = [], [], []
        for _ in range(RUNS):
            t0 = time.process_time()
            _replay(path)
            times.append(time.process_time() - t0)
            t0 = time.process_time()
            _baseline(path)
            base.append(time.process_time() - t0)
            t0 = time.process_time()
            _parse_only(path)
            floor.append(time.process_time() - t0)
    med = statistics.median(times)
    med_floor = statistics.median(floor)
    med_base = statistics.median(base)
    pairs = sorted(b / t for t, b in zip(times, base, strict=True))
    return [
        {
            "name": f"replay throughput ({SHOES} shoes, {cards} cards, JSON to /dev/null)",
            "value": cards / med,
            "unit": "cards/s",
            "target": ">= 250000",
            "note": f"median of {RUNS}: {med:.3f} s CPU; reading+parsing the capture alone takes "
            f"{med_floor / med:.0%} of it ({cards / med_floor:,.0f} cards/s)",
        },
        {
            "name": "baseline: straightforward replayer, same capture (benchmarks/baseline_replay.py)",
            "value": cards / med_base,
            "unit": "cards/s",
            "note": f"median of {RUNS}: {med_base:.3f} s CPU; parse, checksum, tableau, "
            "json.dumps per card and per coup",
        },
        {
            "name": "replay throughput / baseline",
            "value": med_base / med,
            "unit": "x",
            "target": ">= 1.5",
            "note": f"ratio of the medians; interleaved runs' own ratios {pairs[0]:.2f}-{pairs[-1]:.2f}",
        },
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']}: {row['value']:,.2f} {row['unit']} ({row['note']})")
