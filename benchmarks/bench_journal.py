"""Journal commit cost: what it costs to make one event durable.

The daemon commits every device read (``append_input``) and every batch of
events (``append_events``) before it acts on them, with
``synchronous=FULL`` (an fsync per commit). This measures the median time
per commit on the disk under ``./var/`` (where the daemon keeps its journal
by default; set BENCH_DIR to measure another file system), and for
comparison with a batch of 8 events per commit (about one coup's worth) and
with ``synchronous=NORMAL``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from controller.journal import Journal

RUNS = 5
COMMITS = 200
#: Dealing is at most a few cards a second, each costing about two commits
#: (the read, then its events): 10 ms leaves the loop >90 % idle.
TARGET_MS = 10.0


def _event(seq: int) -> dict[str, Any]:
    return {
        "v": 1,
        "type": "card",
        "event_id": f"T01/20261122T065611Z/{seq}",
        "table": "T01",
        "shoe": "20261122T065611Z",
        "seq": seq,
        "ts": "2026-11-22T06:56:11.125Z",
        "coup": 12,
        "position": "B3",
        "card": "QS",
        "value": 0,
        "face_up": False,
    }


def _filesystem(path: Path) -> str:
    """The mount's file-system type (ext4, tmpfs, overlay...), for the note."""
    best, fstype = "", "?"
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                mount = fields[4]
                fs = fields[fields.index("-") + 1]
                if str(path).startswith(mount) and len(mount) > len(best):
                    best, fstype = mount, fs
    except OSError:
        pass
    return fstype


def _per_commit_ms(directory: Path, *, batch: int, synchronous: str, inputs: bool = False) -> float:
    runs = []
    for run in range(RUNS):
        path = directory / f"j-{batch}-{synchronous}-{inputs}-{run}.sqlite3"
        with Journal(path, synchronous=synchronous) as journal:  # type: ignore[arg-type]
            seq = 0
            t0 = time.perf_counter()
            for i in range(COMMITS):
                if inputs:
                    journal.append_input(1763800000.0 + i, "rx", b"$SH,17,CARD,QS*5C\r\n")
                else:
                    journal.append_events([_event(seq + k + 1) for k in range(batch)])
                    seq += batch
            runs.append((time.perf_counter() - t0) / COMMITS * 1000)
    return statistics.median(runs)


def run() -> list[dict[str, Any]]:
    base = Path(os.environ.get("BENCH_DIR", "var"))
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="bench-journal-", dir=base)).resolve()
    fs = _filesystem(directory)
    try:
        one = _per_commit_ms(directory, batch=1, synchronous="FULL")
        rx = _per_commit_ms(directory, batch=1, synchronous="FULL", inputs=True)
        coup = _per_commit_ms(directory, batch=8, synchronous="FULL")
        normal = _per_commit_ms(directory, batch=1, synchronous="NORMAL")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    where = f"{directory.parent} ({fs})"
    runs = f"median of {RUNS} runs x {COMMITS} commits"
    return [
        {
            "name": "journal commit, 1 event (synchronous=FULL)",
            "value": one,
            "unit": "ms/commit",
            "target": f"<= {TARGET_MS:g}",
            "note": f"{runs} on {where}",
        },
        {
            "name": "journal commit, 1 device read (synchronous=FULL)",
            "value": rx,
            "unit": "ms/commit",
            "target": f"<= {TARGET_MS:g}",
            "note": runs,
        },
        {
            "name": "journal commit, 8 events (synchronous=FULL)",
            "value": coup / 8,
            "unit": "ms/event",
            "note": f"{coup:.3f} ms per 8-event commit; {runs}",
        },
        {
            "name": "journal commit, 1 event (synchronous=NORMAL, for comparison)",
            "value": normal,
            "unit": "ms/commit",
            "note": "not used: NORMAL can lose the last commits on power loss",
        },
    ]
