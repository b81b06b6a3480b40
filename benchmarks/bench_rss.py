"""Daemon memory over 10,000 coups.

``shoe-controller run`` (a subprocess) with the fake shoe in process
(``device: {driver: fake, cards_per_second: 0}``: it deals as fast as the
daemon takes the cards), live odds on, the journal with an fsync per commit
and events to a JSON-lines file. Its resident set (VmRSS from
``/proc/<pid>/status``) is sampled every ``INTERVAL_S`` seconds together
with the coups settled or void so far, until ``COUPS`` coups.

Reported: the RSS once ``COUPS`` coups are done (target at most 60 MB), and
its growth over the last half (the RSS at the end minus the RSS at half
way, each the median of the samples within 2 % of the coups around it;
target under 1 MB). The daemon's embedded fake keeps no record of what it
dealt (``FakeShoe(record=False)``), so what grows is the daemon's own.

One run (it takes a few minutes): memory, unlike time, does not need the
median of several.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

COUPS = 10_000
INTERVAL_S = 0.5
TARGET_MB = 60.0
SEED = 1
TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Sample:
    t: float
    coups: int
    kb: int


def read_rss_kb(pid: int) -> int | None:
    """VmRSS in kB (psutil is not a dependency)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class CoupCounter:
    """Coups settled or void so far, read incrementally from the JSON lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.coups = 0

    def poll(self) -> int:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return 0
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        self.coups += sum(1 for x in lines if b'"type":"coup.result"' in x or b'"type":"coup.void"' in x)
        return self.coups


def sample_daemon(directory: Path) -> list[Sample]:
    """Run the daemon until ``COUPS`` coups, sampling its RSS."""
    events = directory / "events.jsonl"
    cfg = {
        "table": "T01",
        "device": {"driver": "fake", "seed": SEED, "cards_per_second": 0},
        "journal": str(directory / "journal.sqlite3"),
        "outputs": {"stdout": False, "jsonl": str(events)},
    }
    config = directory / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    with (directory / "daemon.stderr").open("wb") as err:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "run", "-c", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    counter = CoupCounter(events)
    samples: list[Sample] = []
    t0 = time.monotonic()
    try:
        while counter.poll() < COUPS:
            if daemon.poll() is not None:
                raise RuntimeError(f"the daemon exited {daemon.returncode}")
            if time.monotonic() - t0 > TIMEOUT_S:
                raise RuntimeError(f"fewer than {COUPS} coups after {TIMEOUT_S:.0f} s")
            kb = read_rss_kb(daemon.pid)
            if kb is not None:
                samples.append(Sample(time.monotonic() - t0, counter.coups, kb))
            time.sleep(INTERVAL_S)
        kb = read_rss_kb(daemon.pid)
        if kb is not None:
            samples.append(Sample(time.monotonic() - t0, counter.poll(), kb))
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    return samples


def around(samples: list[Sample], coups: float) -> float:
    """Median RSS (MB) of the samples within 2 % of the run around ``coups``."""
    near = [s.kb for s in samples if abs(s.coups - coups) <= 0.02 * COUPS]
    if not near:
        near = [min(samples, key=lambda s: abs(s.coups - coups)).kb]
    return statistics.median(near) / 1024


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as d:
        samples = sample_daemon(Path(d))
    end = around(samples, samples[-1].coups)
    half = around(samples, COUPS / 2)
    peak = max(s.kb for s in samples) / 1024
    dealing = [s for s in samples if s.coups > 0]
    first = (dealing or samples)[0].kb / 1024
    took = samples[-1].t
    growth = end - half
    return [
        {
            "name": f"daemon RSS after {COUPS:,} coups (fake shoe in process, odds on)",
            "value": end,
            "unit": "MB",
            "target": f"<= {TARGET_MB:g}",
            "note": f"{first:.1f} MB at the first coups, peak {peak:.1f} MB; {took:.0f} s "
            f"({samples[-1].coups / took:.0f} coups/s), {len(samples)} samples",
        },
        {
            "name": "daemon RSS growth over the last half",
            "value": growth,
            "unit": "MB",
            "target": "none (< 1)",
            "note": f"{half:.1f} MB at {COUPS // 2:,} coups -> {end:.1f} MB at {COUPS:,}",
        },
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']}: {row['value']:.2f} {row['unit']} ({row['note']})")
