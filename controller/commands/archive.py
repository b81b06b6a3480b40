"""``shoe-controller archive --config archive.yaml [--migrate | --stats | --backfill JOURNAL...]``:
every table's events from the broker (MQTT 5, ``broker:``) or a NATS
JetStream stream (``nats:``, controller/archive/jetstream.py) into
PostgreSQL (controller/archive).

``--migrate`` applies the pending schema migrations (under an advisory
lock: safe beside running archivers), makes the partitions ahead and
exits; the archiver itself never changes the schema, and refuses to start
(exit 2) on a database whose schema is behind. ``--stats`` prints the
durable counters and the number of integrity conflicts, rejects and
events as one JSON object (replayed events counted apart: ``replay_*``),
and exits. ``--backfill`` writes tables' SQLite journals
into the archive through the same idempotent store (controller/archive/backfill.py),
prints the counts per journal and exits: 0 once every journal is read
through, whatever was kept aside (each event set aside is one line on
stderr, ``<journal>: seq N set aside: <reason>``, up to
``MAX_REJECT_LINES`` a journal, then their count; all are in ``rejects``
and in the counts); 1 if a journal cannot be read or the database fails
(what was committed stays: a second run counts it as duplicates).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from controller.textsafe import visible

if TYPE_CHECKING:
    from controller.archive.config import ArchiveConfig

#: Events set aside by a backfill shown one line each, per journal (the rest counted).
MAX_REJECT_LINES = 100


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)

    import importlib.util

    from controller.errors import UsageError

    if importlib.util.find_spec("psycopg") is None:
        raise UsageError("the archive needs psycopg 3: pip install 'shoe-controller[archive]'")

    from controller import logs
    from controller.archive.config import load_archive_config

    logs.setup()
    cfg = load_archive_config(args.config)
    if args.migrate:
        return _migrate(cfg.dsn, cfg.partitions_ahead)
    # sentences for a person at a terminal, JSON for a program (or --json)
    as_json = args.json or not sys.stdout.isatty()
    if args.stats:
        return _stats(cfg.dsn, as_json)
    if args.backfill:
        return _backfill(cfg, args.backfill, as_json)
    if cfg.nats is not None:
        from controller.archive.jetstream import JetStreamArchiver

        return JetStreamArchiver(cfg, stop).run()
    from controller.archive.service import Archiver

    return Archiver(cfg, stop).run()


def _migrate(dsn: str, ahead: int) -> int:
    import datetime as dt

    from controller.archive import db, migrate, partitions

    with db.connect(dsn, autocommit=True) as conn:
        done = migrate.apply(conn)
        made = partitions.ensure_ahead(conn, dt.datetime.now(dt.UTC), ahead)
        versions = migrate.applied(conn)
    applied = ", ".join(f"{m.version:04d}_{m.name}" for m in done) or "none (already current)"
    print(f"schema version {max(versions)}; applied: {applied}; partitions made: {made}")
    return 0


def _backfill(cfg: ArchiveConfig, paths: list[str], as_json: bool = True) -> int:
    import psycopg

    from controller.archive import db, migrate
    from controller.archive.backfill import backfill
    from controller.archive.parse import printable
    from controller.archive.store import Store
    from controller.errors import ConfigError, RuntimeFailure

    store = Store(
        archiver=f"{cfg.client_id}/backfill",
        prefix=cfg.topic_prefix,
        max_payload_bytes=cfg.max_payload_bytes,
        retention_months=cfg.retention_months,
        partitions_ahead=cfg.partitions_ahead,
    )
    shown: dict[str, int] = {}

    def set_aside(path: str, seq: int, reason: str) -> None:
        shown[path] = shown.get(path, 0) + 1
        if shown[path] <= MAX_REJECT_LINES:
            print(
                f"shoe-controller archive: {printable(path)}: seq {seq} set aside: {reason}", file=sys.stderr
            )

    with db.connect(cfg.dsn) as conn:
        problem = migrate.check_current(conn)
        conn.rollback()
        if problem is not None:
            raise ConfigError(problem)
        try:
            counts = backfill(conn, store, paths, set_aside)
        except psycopg.Error as exc:
            raise RuntimeFailure(
                f"the database failed during the backfill: {db.one_line(exc)} (what was committed stays; "
                "run it again: what the archive holds counts as duplicates)"
            ) from None
    for path, n in shown.items():
        if n > MAX_REJECT_LINES:
            print(
                f"shoe-controller archive: {printable(path)}: {n - MAX_REJECT_LINES} more set aside "
                "(see the rejects table)",
                file=sys.stderr,
            )
    if as_json:
        print(json.dumps(counts, sort_keys=True))
    else:
        for path, c in counts.items():
            print(printable(f"{path}: {backfill_sentence(c)}"))
    conflicts = sum(c["conflicts"] for c in counts.values())
    if conflicts:
        print(
            f"shoe-controller archive: {conflicts} integrity conflict(s): see the conflicts table",
            file=sys.stderr,
        )
    return 0


def _stats(dsn: str, as_json: bool = True) -> int:
    from controller.archive import db, migrate
    from controller.archive.store import counters
    from controller.errors import ConfigError

    with db.connect(dsn) as conn:
        problem = migrate.check_current(conn)
        if problem is not None:
            raise ConfigError(problem)
        out = {
            "counters": counters(conn),
            "conflicts": conn.execute("SELECT count(*) FROM conflicts").fetchone()[0],  # type: ignore[index]
            "rejects": conn.execute("SELECT count(*) FROM rejects").fetchone()[0],  # type: ignore[index]
            "events": conn.execute("SELECT count(*) FROM event_ids").fetchone()[0],  # type: ignore[index]
            # replayed events, archived apart (schema replays): never in the figures above
            "replay_events": conn.execute("SELECT count(*) FROM replays.event_ids").fetchone()[0],  # type: ignore[index]
            "replay_conflicts": conn.execute("SELECT count(*) FROM replays.conflicts").fetchone()[0],  # type: ignore[index]
        }
    if as_json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(stats_text(out), end="")
    return 0


def _n(x: Any) -> str:
    return f"{int(x):,}"


def backfill_sentence(c: Mapping[str, Any]) -> str:
    """One journal's backfill counts as a sentence."""
    return (
        f"{_n(c['received'])} events read: {_n(c['archived'])} archived, {_n(c['duplicates'])} already"
        f" there, {_n(c['conflicts'])} conflicts, {_n(c['rejects'])} set aside"
    )


def stats_text(out: Mapping[str, Any]) -> str:
    """``--stats`` for a person: the archive's totals in a sentence, then a
    line per archiver with its counters (those at 0 left out)."""
    lines = [
        f"archive: {_n(out['events'])} events, {_n(out['conflicts'])} conflicts, {_n(out['rejects'])}"
        f" set aside (rejects); replayed apart: {_n(out.get('replay_events', 0))} events,"
        f" {_n(out.get('replay_conflicts', 0))} conflicts"
    ]
    for name, counts in sorted(out["counters"].items()):
        shown = ", ".join(f"{k.replace('_', ' ')} {_n(v)}" for k, v in counts.items() if v)
        lines.append(f"  archiver {name}: {shown or 'nothing yet'}")
    if not out["counters"]:
        lines.append("  no archiver has written yet")
    return "".join(visible(line) + "\n" for line in lines)
