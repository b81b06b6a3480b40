"""Where replay time goes (a dev-time tool, not part of ``make bench``):
``python -m benchmarks.profile_replay [SHOES]``.

Times the replay of ``bench_replay``'s capture stage by stage, without a
profiler (each stage is the previous one plus one layer; CPU time, medians of 5,
interleaved): reading and parsing the capture, + decoding the frames,
+ the engine, + ``replay_events`` around them (the capture's header read,
settings, the generator), + one JSON document per event written. Then runs the whole replay
once under cProfile and prints the functions with the most own time."""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks.bench_replay import _replay, make_capture
from controller.engine import Engine
from controller.replay import ReplayOptions, replay_events, settings_for
from controller.rules import load_profile
from controller.shoelog import read_device_columns
from firmware_protocols.detect import FrameDecoder, make_decoder
from firmware_protocols.frames import Frame

RUNS = 5


def _stages(path: Path) -> dict[str, Callable[[], object]]:
    st = settings_for(path, ReplayOptions())
    profile = load_profile(st["profile"], st["rules"])

    # Each stage reads and decodes as replay_events does (blocks of reads,
    # decoded a block at a time), so that each adds only its own layer; a
    # Record per line and a decoder call per read, as this tool once did,
    # cost more than replay_events' own loop and made its stage negative.
    def records() -> int:
        return sum(len(ts) for _, ts, _ in read_device_columns(path))

    def frames(dec: FrameDecoder) -> Iterator[list[Frame]]:
        many = getattr(dec, "feed_many", None)
        for _, ts, datas in read_device_columns(path):
            if many is not None:
                yield many(ts, datas)
            else:
                yield [f for t, d in zip(ts, datas, strict=True) for f in dec.feed(t, d)]

    def decode() -> int:
        return sum(len(block) for block in frames(make_decoder(st["protocol"])))

    def engine() -> int:
        eng = Engine(st["table"], profile, st["decks"])
        feed = eng.feed
        return sum(len(feed(f)) for block in frames(make_decoder(st["protocol"])) for f in block)

    return {
        "read+parse the capture": records,
        "+ decode frames": decode,
        "+ engine (events as dicts)": engine,
        "+ replay_events (header, settings, generator)": lambda: sum(1 for _ in replay_events(path)),
        "+ JSON per event to /dev/null (= bench_replay)": lambda: _replay(path),
    }


def main(argv: list[str]) -> int:
    shoes = int(argv[0]) if argv else 100
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "capture.shoelog"
        make_capture(path, shoes=shoes)
        stages = _stages(path)
        times: dict[str, list[float]] = {name: [] for name in stages}
        for _ in range(RUNS):
            for name, fn in stages.items():
                t0 = time.process_time()
                fn()
                times[name].append(time.process_time() - t0)
        cards = _replay(path)
        prev = 0.0
        total = statistics.median(times[list(stages)[-1]])
        print(f"{shoes} shoes, {cards} cards; medians of {RUNS}; each stage adds one layer")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"  {name:50s} {med:7.3f} s  (+{med - prev:6.3f} s, {(med - prev) / total:4.0%})")
            prev = med
        prof = cProfile.Profile()
        prof.enable()
        _replay(path)
        prof.disable()
    print("\ncProfile of one replay (own time; the profiler inflates small calls):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
