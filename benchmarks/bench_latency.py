"""Card-to-subscriber latency over a real Mosquitto through a pty.

The benchmark plays the shoe itself: it deals :class:`drivers.fake.FakeShoe`
frames into the master side of a pseudo-terminal, paced at ``RATE`` cards
per second, and notes ``time.time()`` right after each card frame's write.
The daemon (``shoe-controller run``, a subprocess: serial driver on the
pty's slave, journal with an fsync per commit, live odds on, MQTT out)
publishes; a subscriber in this process (QoS 1) notes the arrival of each
``card`` event. The n-th card written is the n-th card event received
(checked by the card's code). Both clocks are this process's, so no clock
skew enters the figure.

Each run deals ``CARDS`` cards from a fresh shoe sequence; the figures are
the median over ``RUNS`` runs of each run's p50, p99 and max; the p99 of the
cards within a coup (all but each coup's first card, which waits for what
the daemon does on settling the coup before) is given apart. For comparison
each run's cards go through the daemon with live odds off too, and with
the journal on tmpfs (no disk flush: the daemon's own share), and three
baselines are measured once, the floor under the figure:

* the pty alone: the same frames written to the master, read from the slave
  by a reader thread in this process;
* the broker alone: a QoS 1 publish from one client to a subscriber;
* the disk alone: one commit's bytes written and ``fdatasync``-ed.

Each run's cards also go through ``benchmarks.pipeline_floor``, a
straightforward pipeline doing the daemon's I/O and nothing else (serial
read, a commit's bytes flushed per frame, QoS 1 publish): the floor in one
piece, which a sum of the floors' p99s overstates.

Needs the ``mosquitto`` binary (``make deps-system``).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tty
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from drivers.fake import FakeShoe

CARDS = 2000
RUNS = 3
RATE = 100.0  # cards per second; other frames go out between the cards
TARGET_P99_MS = 3.0  # the target: card-to-subscriber p99 <= 3 ms at 100 cards/s, odds on
TABLE = "T01"


# --- plumbing ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mosquitto() -> str:
    for candidate in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mosquitto")
    if not found:
        raise RuntimeError("mosquitto is not installed (make deps-system installs it)")
    return found


@contextlib.contextmanager
def broker(directory: Path, extra_config: str = "") -> Iterator[int]:
    """A throwaway Mosquitto on a free loopback port; yields the port.
    ``extra_config``: further lines of mosquitto.conf."""
    port = _free_port()
    conf = directory / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        f"log_dest file {directory}/mosquitto.log\nuser {getpass.getuser()}\n{extra_config}"
    )
    proc = subprocess.Popen(
        [_mosquitto(), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("mosquitto did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@dataclass
class Arrivals:
    """Receipt times of messages, in arrival order, with their payloads."""

    times: list[float] = field(default_factory=list)
    perf: list[int] = field(default_factory=list)  # perf_counter_ns, for --trace
    payloads: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __len__(self) -> int:
        with self.lock:
            return len(self.times)


def subscriber(port: int, topic: str) -> tuple[mqtt.Client, Arrivals]:
    """A QoS 1 subscriber noting ``time.time()`` at each message."""
    got = Arrivals()
    ready = threading.Event()
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)

    def on_message(c: mqtt.Client, u: Any, msg: mqtt.MQTTMessage) -> None:
        now = time.time()
        perf = time.perf_counter_ns()
        with got.lock:
            got.times.append(now)
            got.perf.append(perf)
            got.payloads.append(bytes(msg.payload))

    client.on_message = on_message
    client.on_subscribe = lambda *a: ready.set()
    client.connect("127.0.0.1", port)
    client.loop_start()
    client.subscribe(topic, qos=1)
    if not ready.wait(10):
        raise RuntimeError("no SUBACK")
    return client, got


def card_frames(seed: int) -> list[tuple[float, bytes, str | None]]:
    """The fake's frames up to the ``CARDS``-th card: ``(synthetic time,
    bytes, card code or None for other frames)``."""
    out: list[tuple[float, bytes, str | None]] = []
    cards = 0
    for t, data in FakeShoe(seed=seed, cards_per_second=RATE).stream():
        card = None
        if b",CARD," in data:
            card = data.split(b",CARD,")[1][:2].decode()
            cards += 1
        out.append((t, data, card))
        if cards == CARDS:
            break
    return out


def after_result(frames: list[tuple[float, bytes, str | None]]) -> list[bool]:
    """For each card, whether it is the first after a RESULT (a new coup's
    first card, which waits for whatever the daemon does on settling)."""
    out: list[bool] = []
    previous = b""
    for _, data, card in frames:
        if card is not None:
            out.append(b",RESULT" in previous)
        previous = data
    return out


def play(
    master: int, frames: list[tuple[float, bytes, str | None]], perf: list[int] | None = None
) -> list[float]:
    """Write the frames at their pace; ``time.time()`` as each card's write
    begins (and ``perf_counter_ns`` into ``perf``, if given): taken after the
    write, a writer descheduled between the two on a loaded machine timed
    the card after its subscriber had it (a latency below zero)."""
    written: list[float] = []
    t_syn0 = frames[0][0]
    start = time.monotonic()
    for t, data, card in frames:
        delay = start + (t - t_syn0) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if card is not None:
            written.append(time.time())
            if perf is not None:
                perf.append(time.perf_counter_ns())
        view = memoryview(data)
        while view:
            select.select([], [master], [], 1.0)
            view = view[os.write(master, view) :]
    return written


def open_pty() -> tuple[int, int, str]:
    master, slave = os.openpty()
    tty.setraw(slave)
    return master, slave, os.ttyname(slave)


def stats_ms(latencies: list[float]) -> tuple[float, float, float]:
    """p50, p99 and max in milliseconds."""
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, round(0.99 * len(ms)) - 1)]
    return statistics.median(ms), p99, ms[-1]


# --- the measurements -------------------------------------------------------------


def pty_baseline(frames: list[tuple[float, bytes, str | None]]) -> list[float]:
    """Write to the master, read the slave in a thread: per-card latency."""
    master, slave, _ = open_pty()
    read_at: list[float] = []
    done = threading.Event()

    def reader() -> None:
        buf = b""
        while not done.is_set():
            ready, _, _ = select.select([slave], [], [], 0.2)
            if not ready:
                continue
            buf += os.read(slave, 4096)
            now = time.time()
            *lines, buf = buf.split(b"\r\n")
            read_at.extend(now for line in lines if b",CARD," in line)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        written = play(master, frames)
        deadline = time.monotonic() + 10
        while len(read_at) < len(written) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        done.set()
        th.join(2)
        os.close(master)
        os.close(slave)
    return [r - w for w, r in zip(written, read_at, strict=False)]


def broker_baseline(port: int, n: int = CARDS, rate: float = RATE) -> list[float]:
    """QoS 1 publish -> subscriber receipt over the same broker."""
    client, got = subscriber(port, "bench/latency")
    pub = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    sent: list[float] = []
    try:
        for i in range(n):
            sent.append(time.time())
            pub.publish("bench/latency", json.dumps({"i": i}), qos=1)
            time.sleep(1 / rate)
        deadline = time.monotonic() + 10
        while len(got) < n and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        pub.loop_stop()
        pub.disconnect()
        client.loop_stop()
        client.disconnect()
    return [r - s for s, r in zip(sent, got.times, strict=False)]


#: what a card's durable commit writes to the journal's WAL: 6 pages of
#: 4 KiB, each behind its 24-byte frame header (counted with ``strace -e
#: pwrite64,fdatasync`` on ``Journal.append_input`` of one card and its event)
FLUSH_BYTES = 6 * (4096 + 24)
#: the file the flush floor writes into, rewritten in place like a WAL
#: that has wrapped (so the flush is the data's alone, no metadata)
FLUSH_FILE_BYTES = 4 << 20


def flush_baseline(directory: Path, n: int = CARDS, rate: float = RATE) -> list[float]:
    """The disk alone: ``FLUSH_BYTES`` written into a file in ``directory``
    (the journal's file system) and ``fdatasync``-ed, paced like the cards,
    so the disk and the CPUs are idle before each flush as they are before
    each card. Per-flush seconds: the floor under the journal's commit."""
    path = directory / "flush-floor.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, bytes(FLUSH_FILE_BYTES))
        os.fsync(fd)
        block = os.urandom(FLUSH_BYTES)
        offset = 0
        took: list[float] = []
        for _ in range(n):
            t0 = time.perf_counter()
            os.pwrite(fd, block, offset)
            os.fdatasync(fd)
            took.append(time.perf_counter() - t0)
            offset = (offset + FLUSH_BYTES) % (FLUSH_FILE_BYTES - FLUSH_BYTES)
            time.sleep(1 / rate)
        return took
    finally:
        os.close(fd)
        path.unlink()


def _port_opened(pid: int, path: str) -> bool:
    """Whether process ``pid`` has ``path`` open (so it is reading the pty)."""
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    return True
    return False


CARD_TOPIC = f"baccarat/{TABLE}/card"


def cards_through(
    name: str,
    port: int,
    frames: list[tuple[float, bytes, str | None]],
    command: Callable[[str], list[str]],
    stderr: Path,
    *,
    env: dict[str, str] | None = None,
    perf: list[int] | None = None,
) -> tuple[list[float], Arrivals]:
    """Play ``frames`` into a pty whose slave a subprocess reads
    (``command(tty)``), to a QoS 1 subscriber of the card topic; stop the
    process (SIGTERM) and check that the cards arrived as written, in order.
    Per-card write -> subscriber latency, and the arrivals. ``perf``:
    ``perf_counter_ns`` as each card's write begins (``play``)."""
    master, slave, path = open_pty()
    argv = command(path)
    client, got = subscriber(port, CARD_TOPIC)
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(stderr, "wb"),  # noqa: SIM115 - owned by the process
    )
    try:
        deadline = time.monotonic() + 30
        while not _port_opened(proc.pid, path):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the {name} did not open {path}")
            time.sleep(0.05)
        time.sleep(0.5)  # pyserial flushes the input right after opening
        written = play(master, frames, perf)
        deadline = time.monotonic() + 30
        while len(got) < len(written) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        client.loop_stop()
        client.disconnect()
        os.close(master)
        os.close(slave)
    with got.lock:
        received = [json.loads(p)["card"] for p in got.payloads]
    sent = [card for _, _, card in frames if card is not None]
    if received != sent:
        raise RuntimeError(
            f"the {name}'s card events do not match the cards written ({len(received)} of {len(sent)})"
        )
    return [r - w for w, r in zip(written, got.times, strict=True)], got


def daemon_run(
    port: int,
    directory: Path,
    frames: list[tuple[float, bytes, str | None]],
    *,
    odds: bool = True,
    signing: bool = True,
    trace: dict[str, Any] | None = None,
) -> list[float]:
    """One run through the daemon: per-card write -> subscriber latency.
    ``trace``: run it under ``benchmarks.trace_daemon`` and fill the dict
    with its stage timestamps plus the write and arrival times."""
    config = directory / "config.yaml"

    def command(tty: str) -> list[str]:
        cfg = {
            "table": TABLE,
            "device": {"driver": "serial", "port": tty, "baudrate": 115200},
            "journal": str(directory / "journal.sqlite3"),
            "odds": odds,
            "signing": signing,
            "outputs": {"stdout": False, "mqtt": {"host": "127.0.0.1", "port": port, "client_id": "bench"}},
        }
        config.write_text(yaml.safe_dump(cfg))
        module = "benchmarks.trace_daemon" if trace is not None else "controller.cli"
        return [sys.executable, "-m", module, "run", "-c", str(config)]

    written_perf: list[int] = []
    latencies, got = cards_through(
        "daemon",
        port,
        frames,
        command,
        directory / "daemon.stderr",
        env=dict(os.environ, SHOE_TRACE=str(directory / "trace.json")),
        perf=written_perf,
    )
    if trace is not None:
        trace.update(json.loads((directory / "trace.json").read_text()))
        trace["written"] = written_perf
        trace["arrived"] = list(got.perf)
    return latencies


def pipeline_run(port: int, directory: Path, frames: list[tuple[float, bytes, str | None]]) -> list[float]:
    """The same cards through ``benchmarks.pipeline_floor`` (the daemon's
    I/O alone: serial read, a commit's bytes flushed per frame, QoS 1
    publish) instead of the daemon: per-card write -> subscriber latency,
    the floor measured in one piece."""
    latencies, _ = cards_through(
        "pipeline",
        port,
        frames,
        lambda tty: [
            sys.executable,
            "-m",
            "benchmarks.pipeline_floor",
            str(port),
            tty,
            str(directory),
            CARD_TOPIC,
        ],
        directory / "pipeline.stderr",
    )
    flushed = int((directory / "pipeline.flushed").read_text())
    if flushed != len(frames):
        raise RuntimeError(f"the pipeline flushed {flushed} times for {len(frames)} frames")
    return latencies


#: the card's path, in order: (stage, from mark, to mark); "written" and
#: "arrived" are the benchmark's, the rest the daemon's (benchmarks.trace_daemon)
STAGES = [
    ("pty write -> driver.read returns", "written", "read"),
    ("read -> Daemon._input", "read", "input"),
    ("decode + engine.feed", "input", "applied"),
    ("journal commit (fsync)", "applied", "committed"),
    ("commit -> paho publish() call (hand-off)", "committed", "publish_call"),
    ("paho publish() call", "publish_call", "publish_ret"),
    ("publish -> network thread send", "publish_ret", "sock_send"),
    ("socket send -> subscriber", "sock_send", "arrived"),
    ("handed -> daemon input done (analytics, checkpoint)", "handed", "input_done"),
    ("total: write -> subscriber", "written", "arrived"),
]


def trace_table(trace: dict[str, Any], firsts: list[bool]) -> list[str]:
    """Per-stage p50/p99 (ms) of the cards' path (all cards, then a coup's
    first cards alone), and the per-call costs."""
    marks = trace["marks"]
    # a card's marks start at "applied"; the other seqs marked are the
    # events published beside the cards (odds, roads, results)
    seqs = sorted((s for s in marks if "applied" in marks[s]), key=int)
    rows: list[dict[str, int]] = []
    for seq, w, a in zip(seqs, trace["written"], trace["arrived"], strict=False):
        rows.append({**marks[seq], "written": w, "arrived": a})
    lines: list[str] = []
    for title, chosen in (
        ("all cards", rows),
        ("a coup's first card", [r for r, f in zip(rows, firsts, strict=False) if f]),
    ):
        lines.append(f"{'stage (' + title + ')':55} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  n")
        for name, start, end in STAGES:
            d = [(r[end] - r[start]) / 1e9 for r in chosen if start in r and end in r]
            if d:
                p50, p99, mx = stats_ms(d)
                lines.append(f"{name:55} {p50:8.3f} {p99:8.3f} {mx:8.3f}  {len(d)}")
    lines.append(f"{'per call (all inputs)':55} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  n")
    for name, ns in sorted(trace["costs"].items()):
        p50, p99, mx = stats_ms([x / 1e9 for x in ns])
        lines.append(f"{name:55} {p50:8.3f} {p99:8.3f} {mx:8.3f}  {len(ns)}")
    lines.extend(gc_lines(trace, rows))
    return lines


def gc_lines(trace: dict[str, Any], rows: list[dict[str, int]]) -> list[str]:
    """The garbage collector's passes while the cards went through: how many
    began on a card's path (between its write and its arrival), and the
    longest of those; then what the collector walked at the stop."""
    passes = trace.get("gc", [])
    if not rows or not passes:
        return []
    first, last = min(r["written"] for r in rows), max(r["arrived"] for r in rows)
    during = [(s, e, g) for s, e, g in passes if first <= s <= last]
    hit = [(s, e, g) for s, e, g in during if any(r["written"] <= s <= r["arrived"] for r in rows)]
    longest = max(((e - s) / 1e6 for s, e, _ in hit), default=0.0)
    lines = [
        f"collector passes while dealing: {len(during)}"
        f" (generation 1 or 2: {sum(1 for *_, g in during if g)});"
        f" begun on a card's path: {len(hit)}, longest {longest:.3f} ms"
    ]
    heap = trace.get("heap", {})
    if heap:
        lines.append(
            f"at the stop the collector tracked {heap['tracked']:,} objects, {heap['frozen']:,} frozen"
        )
    return lines


def trace_run(seed: int = 100) -> list[str]:
    """One traced run with odds on: the per-stage table."""
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as d, broker(Path(d)) as port:
        trace: dict[str, Any] = {}
        frames = card_frames(seed=seed)
        latencies = daemon_run(port, Path(d), frames, trace=trace)
        p50, p99, mx = stats_ms(latencies)
        table = trace_table(trace, after_result(frames))
        return [f"traced run: p50 {p50:.3f} / p99 {p99:.3f} / max {mx:.3f} ms", *table]


def run() -> list[dict[str, Any]]:
    daemon_stats, mid_stats, no_odds_stats, tmpfs_stats, pipeline_stats = [], [], [], [], []
    unsigned_stats: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as d:
        base = Path(d)
        with broker(base) as port:
            for i in range(RUNS):
                frames = card_frames(seed=100 + i)
                run_dir = base / f"run{i}"
                run_dir.mkdir()
                latencies = daemon_run(port, run_dir, frames)
                daemon_stats.append(stats_ms(latencies))
                firsts = after_result(frames)
                within = [x for x, first in zip(latencies, firsts, strict=True) if not first]
                mid_stats.append(stats_ms(within))
                # the same cards without live odds: the work the daemon does
                # after each RESULT delays the next coup's first card
                no_odds_dir = base / f"no-odds{i}"
                no_odds_dir.mkdir()
                no_odds_stats.append(stats_ms(daemon_run(port, no_odds_dir, frames, odds=False)))
                # the same cards with signing off: what signing
                # and chaining every event costs on a card's path
                unsigned_dir = base / f"unsigned{i}"
                unsigned_dir.mkdir()
                unsigned_stats.append(stats_ms(daemon_run(port, unsigned_dir, frames, signing=False)))
                # the same cards through the daemon's I/O alone, in one
                # piece, on the same file system: the floor under this run
                pipeline_dir = base / f"pipeline{i}"
                pipeline_dir.mkdir()
                pipeline_stats.append(stats_ms(pipeline_run(port, pipeline_dir, frames)))
                # the same cards with the journal in memory (tmpfs: an fsync
                # there flushes nothing): what the daemon costs without the
                # disk. Not a configuration to run a table on.
                if os.path.isdir("/dev/shm"):
                    with tempfile.TemporaryDirectory(prefix="bench-latency-", dir="/dev/shm") as shm:
                        tmpfs_stats.append(stats_ms(daemon_run(port, Path(shm), frames)))
            # the floor, once: the same cards through the pty alone, and as
            # many QoS 1 messages through the broker alone
            pty_stats = [stats_ms(pty_baseline(card_frames(seed=100)))]
            broker_stats = [stats_ms(broker_baseline(port))]
            flush_stats = [stats_ms(flush_baseline(base))]
    load = os.getloadavg()[0]

    def med(stats: list[tuple[float, float, float]], i: int) -> float:
        return statistics.median(s[i] for s in stats)

    runs = f"median of {RUNS} runs x {CARDS} cards at {RATE:g} cards/s, load average {load:.1f}"
    floor = (
        f"floor: pty alone p50 {med(pty_stats, 0):.3f} / p99 {med(pty_stats, 1):.3f} ms, "
        f"broker QoS 1 alone p50 {med(broker_stats, 0):.3f} / p99 {med(broker_stats, 1):.3f} ms"
    )
    floor_p99 = med(pty_stats, 1) + med(flush_stats, 1) + med(broker_stats, 1)
    return [
        {
            "name": "card-to-subscriber latency p50 (pty -> daemon -> mosquitto)",
            "value": med(daemon_stats, 0),
            "unit": "ms",
            "note": f"{runs}; {floor}",
        },
        {
            "name": "card-to-subscriber latency p99",
            "value": med(daemon_stats, 1),
            "unit": "ms",
            "target": f"<= {TARGET_P99_MS:g}",
            "note": f"per run: {', '.join(f'{s[1]:.2f}' for s in daemon_stats)} ms",
        },
        {
            "name": "card-to-subscriber latency max",
            "value": med(daemon_stats, 2),
            "unit": "ms",
            "note": f"per run: {', '.join(f'{s[2]:.2f}' for s in daemon_stats)} ms",
        },
        {
            "name": "card-to-subscriber latency p99, cards within a coup",
            "value": med(mid_stats, 1),
            "unit": "ms",
            "note": f"all but each coup's first card (p50 {med(mid_stats, 0):.2f} ms): that one waits "
            "for the settlement, roads, odds and checkpoint of the coup before",
        },
        {
            "name": "card-to-subscriber latency p99, live odds off (comparison)",
            "value": med(no_odds_stats, 1),
            "unit": "ms",
            "note": f"the same cards: p50 {med(no_odds_stats, 0):.2f}, max {med(no_odds_stats, 2):.2f} ms",
        },
        {
            "name": "card-to-subscriber latency p99, signing off (comparison)",
            "value": med(unsigned_stats, 1),
            "unit": "ms",
            "note": f"the same cards, every event unsigned: p50 {med(unsigned_stats, 0):.2f}, max "
            f"{med(unsigned_stats, 2):.2f} ms; signing on / off p99: "
            f"{med(daemon_stats, 1) / med(unsigned_stats, 1):.2f}x (the rows above sign every event)",
        },
        {
            "name": "floor p99: a straightforward pipeline doing the daemon's I/O, same cards",
            "value": med(pipeline_stats, 1),
            "unit": "ms",
            "note": f"benchmarks.pipeline_floor: serial read, {FLUSH_BYTES:,} bytes written and "
            f"fdatasync-ed per frame, QoS 1 publish; p50 {med(pipeline_stats, 0):.2f}, max "
            f"{med(pipeline_stats, 2):.2f} ms; daemon p99 / this: "
            f"{med(daemon_stats, 1) / med(pipeline_stats, 1):.2f}x",
        },
        {
            "name": "floor p99: pty + a commit's disk flush + broker, each alone, summed",
            "value": floor_p99,
            "unit": "ms",
            "note": f"the flush: {FLUSH_BYTES:,} bytes written and fdatasync-ed in the journal's "
            f"file system, paced like the cards, p50 {med(flush_stats, 0):.3f} / p99 "
            f"{med(flush_stats, 1):.3f} ms; a sum of p99s overstates the floor (the slowest pty "
            "read, flush and broker trip seldom meet on one card): the pipeline row is the floor",
        },
        *(
            [
                {
                    "name": "card-to-subscriber latency p99, journal on tmpfs (comparison: no disk flush)",
                    "value": med(tmpfs_stats, 1),
                    "unit": "ms",
                    "note": f"the same cards, odds on: p50 {med(tmpfs_stats, 0):.2f}, max "
                    f"{med(tmpfs_stats, 2):.2f} ms; the disk's share is the difference",
                }
            ]
            if tmpfs_stats
            else []
        ),
    ]


if __name__ == "__main__":
    if "--trace" in sys.argv[1:]:
        print("\n".join(trace_run()))
        sys.exit(0)
    for row in run():
        print(f"{row['name']}: {row['value']:.3f} {row['unit']} ({row.get('note', '')})")
