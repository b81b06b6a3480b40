"""Surveillance review: how long ``history`` queries take on a journal of
many shoes (``controller.history``).

A real daemon (fake shoe, as fast as it reads, dealing errors injected,
odds on as by default) fills a journal with ``SHOES`` shoes; then each query
is timed (median of ``RUNS``): the shoes, one shoe's coups, one coup's
timeline, a dealing error over the whole journal, a time range, and the
data of a shoe report. Every query opens the journal read-only for one
snapshot, as the command line and the board do; the journal has no index
but its keys (``history`` must not add one), so the whole-journal queries
scan it.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller.history import Reader, ts_to_epoch

SHOES = 40
RUNS = 5
#: A reviewer waits for an answer: half a second is the bound worth keeping.
TARGET_MS = 500.0


def _fill(directory: Path) -> Path:
    journal = directory / "journal.sqlite3"
    cfg = {
        "table": "T01",
        "device": {
            "driver": "fake",
            "seed": 9,
            "cards_per_second": 0,
            "faults": "unread:0.02,gap:0.004,extra:0.01",
        },
        "journal": str(journal),
        "rules": {"correction_deadline_s": 0.3},
        "outputs": {"stdout": False},
    }
    (directory / "config.yaml").write_text(yaml.safe_dump(cfg))
    script = Path(sys.executable).with_name("shoe-controller")
    daemon = subprocess.Popen(
        [str(script), "run", "-c", str(directory / "config.yaml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + 600
        while time.monotonic() < give_up:
            time.sleep(1.0)
            if not journal.exists():
                continue
            try:
                if sum(r["status"] == "ended" for r in Reader(journal).shoes(limit=10_000).rows) >= SHOES:
                    break
            except Exception:
                continue
    finally:
        daemon.terminate()
        daemon.wait(60)
    return journal


def _median_ms(fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def run() -> list[dict[str, Any]]:
    directory = Path(tempfile.mkdtemp(prefix="bench-history-"))
    try:
        journal = _fill(directory)
        r = Reader(journal)
        shoes = r.shoes(limit=10_000).rows
        ended = [s for s in shoes if s["status"] == "ended"]
        middle = ended[len(ended) // 2]
        coups = r.coups(middle["shoe"], limit=10_000).rows
        last = coups[-1]["coup"]
        start = ts_to_epoch(middle["started"])
        mb = journal.stat().st_size / 1e6
        note = f"{len(shoes)} shoes, {mb:.0f} MB journal"
        queries: list[tuple[str, Callable[[], Any]]] = [
            ("history shoes", lambda: r.shoes(limit=10_000)),
            ("history coups --shoe", lambda: r.coups(middle["shoe"])),
            ("history coup (timeline)", lambda: r.timeline(middle["shoe"], last)),
            ("history errors UNREAD_CARD", lambda: r.errors("UNREAD_CARD", limit=10_000)),
            ("history coups --since/--until (1 min)", lambda: r.coups(since=start, until=start + 60)),
            ("history report (data)", lambda: r.shoe_report(middle["shoe"])),
        ]
        return [
            {"name": name, "value": _median_ms(fn), "unit": "ms", "target": f"< {TARGET_MS:g}", "note": note}
            for name, fn in queries
        ]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
