"""Archive ingest: events per second from the broker
into PostgreSQL through one ``shoe-controller archive`` process.

The events are real: two fake 8-deck shoes replayed through the engine
with odds and roads on (cards, results, roads, odds.update, shoe events, as
a table publishes them by default), copied for ``N`` simulated tables
(their own table id, shoe ids and event ids; ``ts`` now). A fast publisher
(one paho client, QoS 1, 1,000 in flight) sends them round-robin across
the tables, as fast as the broker takes them; the clock runs from the
first publish until the archive's durable counter says every one is
committed. The archiver's CPU seconds of a run are counted from its first
publish until the archiver has settled after it (``settled``: the marks
it computes, every ``MARK_EVERY_S`` a table, for the tables a run touched
are that run's cost and must not fall into the next run's; the signed run
came right after the 500 tables' one). Median of ``RUNS`` runs per ``N``;
each run sends ``EVENTS`` new events into the same, growing database
(PostgreSQL on 127.0.0.1:5432, a database made and dropped for the
benchmark; mosquitto as in the tests, with no queue limit).

The floor-size figure: a table's peak event rate is taken as a fast
dealer's pace (``FAST_COUP_S`` seconds a coup, 180 coups an hour) times
the events a coup makes (measured on the same events, shoe events
included); the floor one archiver supports with 10x headroom is the
measured rate / (10 x that).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from paho.mqtt.enums import CallbackAPIVersion

from benchmarks.bench_latency import broker
from benchmarks.bench_replay import make_capture
from controller import signing
from controller.archive import marks
from controller.events import dumps, format_ts
from controller.replay import ReplayOptions, replay_events
from tests.support.archiver import ArchiverProcess, migrate, write_archive_config
from tests.support.postgres import temporary_database, unavailable

TABLE_COUNTS = (10, 100, 500)
#: Signed events: ingest with every signature verified, at this
#: many tables, against the same events unsigned in the same runs.
SIGNED_TABLES = 100
TARGET_VERIFIED_PER_CPU_S = 5000
EVENTS = 20_000
RUNS = 3
FAST_COUP_S = 20.0
HEADROOM = 10
GOAL_TABLES = 500


def template_events() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "two.shoelog"
        make_capture(path, shoes=2)
        return list(replay_events(path, ReplayOptions(odds=True, roads=True)))


def messages(
    template: list[dict[str, Any]],
    tables: int,
    total: int,
    run: int,
    signers: dict[str, signing.Signer] | None = None,
    letter: str = "B",
) -> list[tuple[str, bytes]]:
    """``total`` events round-robin over ``tables`` tables, each table
    walking through the template from its own start. With ``signers``:
    each table's events signed and chained as its journal would
    (``keys`` has the announcements to publish first)."""
    now = format_ts(time.time())
    out: list[tuple[str, bytes]] = []
    heads: dict[str, str | None] = {}
    per_table = -(-total // tables)
    for i in range(per_table):
        for t in range(tables):
            if len(out) == total:
                return out
            k = i + t * 7
            src = template[k % len(template)]
            table = f"{letter}{t:03d}"
            shoe = f"R{run}W{k // len(template)}X{src['shoe'] or '-'}"  # unique ids when the template wraps
            ev = {**src, "table": table, "shoe": shoe, "ts": now, "event_id": f"{table}/{shoe}/{src['seq']}"}
            text = dumps(ev)
            if signers is not None:
                signer = signers.setdefault(table, signing.Signer(Ed25519PrivateKey.generate()))
                ev["key_id"], ev["prev"] = signer.key_id, heads.get(table)
                text = dumps(ev)
                heads[table] = signing.digest(text.encode())
                text = signer.seal(text)
            out.append((f"baccarat/{table}/{ev['type'].replace('.', '/')}", text.encode()))
    return out


def keys(signers: dict[str, signing.Signer]) -> list[tuple[str, bytes]]:
    """Each table's retained key announcement, as its daemon publishes it."""
    return [
        (
            f"baccarat/{table}/keys",
            json.dumps({"table": table, "keys": [{"key_id": s.key_id, "public_key": s.public_key}]}).encode(),
        )
        for table, s in signers.items()
    ]


def archived(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        row = c.execute(
            "SELECT coalesce(sum(value), 0) FROM archive_counters WHERE name = 'archived'"
        ).fetchone()
    return int(row[0]) if row else 0


def publish_and_wait(
    port: int,
    dsn: str,
    msgs: list[tuple[str, bytes]],
    preface: list[tuple[str, bytes]] = (),  # type: ignore[assignment]
) -> float:
    """Seconds from the first publish until all are committed (``preface``:
    published first, not counted: the tables' key announcements)."""
    base = archived(dsn)
    pub = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    pub.max_inflight_messages_set(1000)
    pub.max_queued_messages_set(0)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    try:
        for topic, payload in preface:
            pub.publish(topic, payload, qos=1, retain=True)
        t0 = time.perf_counter()
        for topic, payload in msgs:
            pub.publish(topic, payload, qos=1)
        deadline = time.monotonic() + 600
        while archived(dsn) < base + len(msgs):
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {archived(dsn) - base} of {len(msgs)} archived in 600 s")
            time.sleep(0.02)
        return time.perf_counter() - t0
    finally:
        pub.disconnect()
        pub.loop_stop()


def _list(rates: list[float]) -> str:
    return ", ".join(f"{x:,.0f}" for x in rates)


def settled(pid: int) -> float:
    """The archiver's CPU seconds once the work a run left it is done:
    its marks of the run's tables (computed at most every ``MARK_EVERY_S``
    a table, so due within that of the run's last commit)."""
    time.sleep(marks.MARK_EVERY_S + 1.0)
    return cpu_seconds(pid)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run() -> list[dict[str, Any]]:
    problem = unavailable()
    if problem:
        raise RuntimeError(problem)
    template = template_events()
    coups = sum(1 for e in template if e["type"] in ("coup.result", "coup.void"))
    per_coup = len(template) / coups
    table_peak = per_coup / FAST_COUP_S
    need = GOAL_TABLES * table_peak * HEADROOM
    rates: dict[int, list[float]] = {n: [] for n in TABLE_COUNTS}
    cpu: dict[int, list[float]] = {n: [] for n in TABLE_COUNTS}
    signed_rates: list[float] = []
    signed_cpu: list[float] = []
    with tempfile.TemporaryDirectory() as d, temporary_database("shoe_archive_bench") as dsn:
        directory = Path(d)
        with broker(directory, "max_queued_messages 0\n") as port:
            cfg = write_archive_config(
                directory, host="127.0.0.1", port=port, dsn=dsn, client_id="archive-bench",
                batch_max_events=1000, batch_max_latency_ms=100,
            )  # fmt: skip
            migrate(cfg)
            archiver = ArchiverProcess(cfg, directory / "archiver.log")
            archiver.start()
            assert archiver.proc is not None
            pid = archiver.proc.pid
            try:
                publish_and_wait(port, dsn, messages(template, 10, 2000, run=99))  # warm-up
                settled(pid)
                # the sizes interleaved, so a burst of load from elsewhere on
                # the shared box does not fall on one size only
                for r in range(RUNS):
                    for n in TABLE_COUNTS:
                        msgs = messages(template, n, EVENTS, run=n * 100 + r)
                        c0 = cpu_seconds(pid)
                        rates[n].append(len(msgs) / publish_and_wait(port, dsn, msgs))
                        cpu[n].append(len(msgs) / (settled(pid) - c0))
                    # the same at SIGNED_TABLES tables, every event signed
                    # and verified (new tables, so the archive learns their keys)
                    signers: dict[str, signing.Signer] = {}
                    msgs = messages(
                        template, SIGNED_TABLES, EVENTS, run=7000 + r, signers=signers, letter=f"S{r}"
                    )
                    announce = keys(signers)
                    c0 = cpu_seconds(pid)
                    signed_rates.append(len(msgs) / publish_and_wait(port, dsn, msgs, announce))
                    signed_cpu.append(len(msgs) / (settled(pid) - c0))
            finally:
                archiver.stop()
    rows: list[dict[str, Any]] = []
    for n in TABLE_COUNTS:
        rows.append({
            "name": f"archive ingest, {n} tables",
            "value": statistics.median(rates[n]),
            "unit": "events/s",
            "target": f">= {need:,.0f}",
            "note": f"median of {RUNS} x {EVENTS:,} events, wall clock; runs " + _list(rates[n]),
        })  # fmt: skip
    for n in TABLE_COUNTS:
        rows.append({
            "name": f"archiver process, {n} tables",
            "value": statistics.median(cpu[n]),
            "unit": "events/CPU-s",
            "note": "events per second of the archiver's own CPU time (its capacity on a core of its own)",
        })  # fmt: skip
    unsigned_cpu = statistics.median(cpu[SIGNED_TABLES])
    rows.append({
        "name": f"archive ingest, {SIGNED_TABLES} tables, signed (each verified)",
        "value": statistics.median(signed_rates),
        "unit": "events/s",
        "note": f"median of {RUNS} x {EVENTS:,} events, wall clock; runs " + _list(signed_rates),
    })  # fmt: skip
    rows.append({
        "name": f"archiver process, {SIGNED_TABLES} tables, signed (each verified)",
        "value": statistics.median(signed_cpu),
        "unit": "events/CPU-s",
        "target": f">= {TARGET_VERIFIED_PER_CPU_S:,}",
        "note": f"runs {_list(signed_cpu)}; unsigned at {SIGNED_TABLES} tables "
        f"{unsigned_cpu:,.0f}: signed / unsigned {statistics.median(signed_cpu) / unsigned_cpu:.2f}x",
    })  # fmt: skip
    slowest = min(statistics.median(rates[n]) for n in TABLE_COUNTS)
    rows.append({
        "name": "a table's peak event rate",
        "value": table_peak,
        "unit": "events/s",
        "note": f"{per_coup:.1f} events a coup (odds, roads on), a fast dealer's {FAST_COUP_S:.0f} s a coup",
    })  # fmt: skip
    rows.append({
        "name": "floor one archiver supports at 10x headroom",
        "value": float(int(slowest / (table_peak * HEADROOM))),
        "unit": "tables",
        "target": f">= {GOAL_TABLES}",
        "note": "the slowest wall-clock median above / (10 x a table's peak); broker, publisher, "
        "PostgreSQL and archiver share this box's 2 cores",
    })  # fmt: skip
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
