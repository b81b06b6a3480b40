"""``shoe-controller replay FILE...``: captures to JSON lines on stdout."""

from __future__ import annotations

import argparse
import os
import sys
import time

from controller.errors import UsageError
from controller.events import dumps
from controller.replay import ReplayOptions, ReplayStats, replay_events, summary
from controller.shoelog import Record, open_capture


def run(args: argparse.Namespace) -> int:
    if args.out == "mqtt":
        raise UsageError("--out mqtt is not available yet: replay to JSON lines (the default)")
    opts = ReplayOptions(
        profile=args.profile,
        decks=args.decks,
        table=args.table,
        protocol=args.protocol,
        odds=args.odds,
        roads=args.roads,
    )
    for path in args.files:
        open_capture(path).close()  # every file readable before the first event
    show_progress = sys.stderr.isatty() and not args.no_progress
    out = sys.stdout
    write = out.write
    for path in args.files:
        stats = ReplayStats()
        bar = None
        pacer = None
        if show_progress:
            from tqdm import tqdm

            bar = tqdm(
                total=os.path.getsize(path),
                unit="B",
                unit_scale=True,
                desc=os.path.basename(path),
                file=sys.stderr,
            )
        if args.realtime:
            pacer = _Pacer()

        def on_record(rec: Record, bar=bar, pacer=pacer) -> None:  # type: ignore[no-untyped-def]
            if pacer is not None:
                pacer.wait_until(rec.t)
            if bar is not None:
                bar.update(len(rec.data) * 2 + 20)

        for event in replay_events(path, opts, stats=stats, on_record=on_record):
            write(dumps(event))
            write("\n")
            if pacer is not None:
                out.flush()
        if bar is not None:
            bar.close()
        print(summary(path, stats), file=sys.stderr)
    out.flush()
    return 0


class _Pacer:
    """Sleeps so that records come out at the pace they were captured."""

    def __init__(self) -> None:
        self.t0: float | None = None
        self.wall0 = 0.0

    def wait_until(self, t: float) -> None:
        if self.t0 is None:
            self.t0, self.wall0 = t, time.monotonic()
            return
        delay = (t - self.t0) - (time.monotonic() - self.wall0)
        if delay > 0:
            time.sleep(delay)
