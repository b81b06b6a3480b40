"""Decoder throughput of every wire protocol, in MB/s of wire bytes.

Each codec decodes a ~5 MB stream of realistic traffic (a device hello,
then shoe after shoe: the shuffler's commitment and order where the
protocol carries them, six-card-ish coups with the dealer's buttons, the
cut card, the odd status) fed in 4096-byte reads, as a driver hands them
over. The figure is the median of 5 runs; the stream is built once,
outside the timing.

Run: ``.venv/bin/python benchmarks/bench_decoders.py`` (or through
``python -m benchmarks``, which calls :func:`run`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import statistics
import time
from collections.abc import Callable, Iterator

from controller.cards import ALL_CARDS
from firmware_protocols.detect import PROTOCOLS, make_encoder
from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)

TARGET_BYTES = 5_000_000
READ_SIZE = 4096
RUNS = 5
DECKS = 8
ANGEL_CYCLE = b"0123456789ABCDEF"


def _shoe_traffic(rng: random.Random, protocol: str) -> Iterator[Frame]:
    """An endless session on one table, as the device of ``protocol`` tells
    it; ``seq`` is filled in by the caller."""
    angel = protocol == "angel-eye/2"
    yield Hello(0.0, 0, "ANGEL-EYE", "", "") if angel else Hello(0.0, 0, "BENCH-1", "1.4.2", "000042")
    while True:
        order = [c for c in ALL_CARDS for _ in range(DECKS)]
        rng.shuffle(order)
        if not angel:
            digest = hashlib.sha256(",".join(order).encode("ascii")).hexdigest()
            yield ShuffleCommit(0.0, 0, "", len(order), digest)
            for i in range(0, len(order), 16):
                yield ShuffleOrder(0.0, 0, i, tuple(order[i : i + 16]))
            yield Button(0.0, 0, "NEWSHOE")
        cut_at = len(order) - rng.randint(14, 60)
        pos = 0
        while pos + 6 <= len(order):
            hands = ["P1", "B1", "P2", "B2", *["P3", "B3"][: rng.choice([0, 1, 2])]]
            for hand in hands:
                card = order[pos]
                pos += 1
                if angel:
                    yield Card(0.0, 0, card, hand=hand)
                else:
                    yield Card(0.0, 0, card if rng.random() > 0.001 else None, face_up=rng.random() < 0.002)
            if pos >= cut_at > pos - len(hands):
                yield CutCard(0.0, 0)
            if angel:
                yield DeviceResult(0.0, 0, rng.choice(["player", "banker", "tie"]), False, False)
                yield Button(0.0, 0, "STANDBY")
            else:
                yield Button(0.0, 0, "RESULT")
                if rng.random() < 0.01:
                    yield Status(0.0, 0, "OK")


def build_stream(protocol: str, target: int = TARGET_BYTES, seed: int = 1) -> tuple[bytes, int]:
    """About ``target`` bytes of ``protocol`` traffic, and its frame count."""
    encoder = make_encoder(protocol)
    encode: Callable[[Frame], bytes] = encoder.encode
    repeat = 3 if protocol == "angel-eye/2" else 1  # Angel Eye sends every message three times
    parts: list[bytes] = []
    size = 0
    seq = 0
    for frame in _shoe_traffic(random.Random(seed), protocol):
        if size >= target:
            break
        # an Angel Eye's seq is a character of a short cycle (docs/devices.md, Angel Eye)
        wire_seq = ANGEL_CYCLE[seq % len(ANGEL_CYCLE)] if repeat == 3 else seq
        raw = encode(_with_seq(frame, wire_seq)) * repeat
        parts.append(raw)
        size += len(raw)
        seq = (seq + 1) % 65536
    return b"".join(parts), len(parts)


def _with_seq(frame: Frame, seq: int) -> Frame:
    return dataclasses.replace(frame, seq=seq)


def measure(protocol: str, stream: bytes, runs: int = RUNS) -> list[float]:
    """Seconds per full decode of ``stream``, one entry per run."""
    decoder_class = PROTOCOLS[protocol][0]
    chunks = [stream[i : i + READ_SIZE] for i in range(0, len(stream), READ_SIZE)]
    times = []
    for _ in range(runs):
        decoder = decoder_class()
        feed = decoder.feed
        started = time.perf_counter()
        for chunk in chunks:
            feed(1.0, chunk)
        times.append(time.perf_counter() - started)
        dropped = sum(v for k, v in decoder.stats.items() if k not in ("frames", "duplicate"))
        if dropped:
            raise AssertionError(f"{protocol}: the benchmark stream should decode cleanly: {decoder.stats}")
    return times


def run() -> list[dict[str, object]]:
    """One row per protocol: decoder throughput (median of 5 runs)."""
    rows: list[dict[str, object]] = []
    for protocol in PROTOCOLS:
        stream, frames = build_stream(protocol)
        median = statistics.median(measure(protocol, stream))
        rows.append(
            {
                "name": f"decode {protocol}",
                "value": round(len(stream) / median / 1e6, 2),
                "unit": "MB/s",
                "protocol": protocol,
                "bytes": len(stream),
                "messages": frames,
                "messages_per_s": round(frames / median),
                "seconds_median": round(median, 4),
                "runs": RUNS,
            }
        )
    return rows


def main() -> None:
    rows = run()
    print(f"{'protocol':<14} {'MB/s':>8} {'messages/s':>12} {'stream bytes':>13} {'median s':>9}")
    for row in rows:
        print(
            f"{row['protocol']!s:<14} {row['value']!s:>8} {row['messages_per_s']!s:>12}"
            f" {row['bytes']!s:>13} {row['seconds_median']!s:>9}"
        )
    print(f"(median of {RUNS} runs, {READ_SIZE}-byte reads)")


if __name__ == "__main__":
    main()
