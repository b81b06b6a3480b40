"""``shoe-controller verify``: check a table's signed, chained record (issue
29) in a journal, the archive or a shoe report's events, and print one
line: the first broken link or bad signature (exit 1), or what was
verified (exit 0). Expected errors (no such file, no database, a bad
range) are one line too (``ExpectedError``), never a traceback.

What is checked, event by event in seq order (``signing.ChainCheck``): each
signed event's signature under the table's keys (the source's own list,
or only ``--key``), its ``prev`` against the digest of the event before it
(a new epoch's first event says so with ``chain_reset``), seqs strictly
increasing, no unsigned event after a signed one; in a journal, each row's
seq and id against its event; in the archive, each ``events`` row against
its signed line. The first event's ``prev`` is not checked (the record may
start mid-chain: retention, a day range): the line says where it starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from controller.errors import RuntimeFailure, UsageError
from controller.signing import ChainCheck, KeyRing, lines_of
from controller.textsafe import visible

#: The largest shoe report events file read (a 12-deck shoe is about 1 MB).
MAX_EVENTS_FILE_BYTES = 64 * 1024 * 1024
#: The longest archive day range verified in one run.
MAX_DAYS = 366
#: A shoe report events file's first line says what it is.
REPORT_FORMAT = "shoe-controller shoe report events"


class Broken(Exception):
    """The first problem found (the line to print, exit 1)."""


def _ring(listed: Iterable[dict[str, Any]], pinned: list[str] | None) -> KeyRing:
    if pinned:
        ring = KeyRing()
        for key in pinned:
            try:
                ring.add(key)
            except ValueError:
                raise UsageError(f"--key {key[:60]!r}: not a base64url Ed25519 public key") from None
        return ring
    return KeyRing.from_announcement(list(listed))


def _walk(check: ChainCheck, items: Iterator[tuple[str, bytes]]) -> None:
    for where, line in items:
        problem = check.feed(where, line)
        if problem is not None:
            raise Broken(problem)


def _summary(what: str, check: ChainCheck) -> str:
    if check.count == 0:
        return f"verified {what}: no events"
    if check.signed == 0:
        # nothing vouched for: not a pass (signing off, or written before it)
        raise Broken(f"{what}: {check.count} events, none signed: nothing to verify")
    keys = ", ".join(sorted(check.ring.keys)) or "none"
    resets = f", {check.resets} new epoch(s) after a lost journal" if check.resets else ""
    return (
        f"verified {what}: {check.count} events, seq {check.first_seq}..{check.last_seq},"
        f" {check.signed} signed (keys {keys}), chain unbroken{resets}"
    )


# --- a journal ----------------------------------------------------------------


def _journal(path: str, pinned: list[str] | None) -> str:
    if not Path(path).is_file():
        raise RuntimeFailure(f"{visible(path)}: no such journal")
    quoted = urllib.parse.quote(str(Path(path).resolve()))
    try:
        db = sqlite3.connect(f"file:{quoted}?mode=ro", uri=True, timeout=10)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'signing_keys'").fetchone()
            listed = json.loads(row[0]) if row else []
            check = ChainCheck(_ring(listed if isinstance(listed, list) else [], pinned))

            def rows() -> Iterator[tuple[str, bytes]]:
                last = -1
                while True:
                    batch = db.execute(
                        "SELECT seq, event_id, json FROM events WHERE seq > ? ORDER BY seq LIMIT 1000",
                        (last,),
                    ).fetchall()
                    if not batch:
                        return
                    for seq, event_id, text in batch:
                        where = f"journal {visible(path)} seq {seq} ({visible(str(event_id))})"
                        line = str(text).encode()
                        try:
                            ev = json.loads(line)
                        except ValueError:
                            ev = None
                        if isinstance(ev, dict) and (ev.get("seq") != seq or ev.get("event_id") != event_id):
                            raise Broken(
                                f"{where}: the row holds event seq {ev.get('seq')!r}"
                                f" ({visible(str(ev.get('event_id')))[:80]}): rows moved or swapped"
                            )
                        yield where, line
                    last = int(batch[-1][0])

            _walk(check, rows())
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise RuntimeFailure(f"{visible(path)}: not a readable shoe-controller journal: {exc}") from None
    return _summary(f"journal {visible(path)}", check)


# --- the archive -----------------------------------------------------------


def _day(text: str | None, name: str, default: dt.date) -> dt.date:
    if text is None:
        return default
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{name}: {text[:40]!r} is not a day (2026-11-20)") from None


def _archive(
    dsn: str, table: str | None, day_from: str | None, day_to: str | None, pinned: list[str] | None
) -> str:
    from controller.config import table_problem

    if table is None:
        raise UsageError("verify: the archive is verified per table: give --table")
    problem = table_problem(table)
    if problem is not None:
        raise UsageError(f"--table: {problem}")
    to = _day(day_to, "--to", dt.datetime.now(dt.UTC).date())
    start = _day(day_from, "--from", to - dt.timedelta(days=30))
    if start > to:
        raise UsageError(f"--from {start} is after --to {to}")
    if (to - start).days + 1 > MAX_DAYS:
        raise UsageError(
            f"--from {start} --to {to}: {(to - start).days + 1} days; at most {MAX_DAYS} in one run"
        )
    import psycopg

    lo = dt.datetime.combine(start, dt.time(), dt.UTC)
    hi = dt.datetime.combine(to + dt.timedelta(days=1), dt.time(), dt.UTC)
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            listed = [
                {"key_id": str(k), "public_key": str(p)}
                for k, p in conn.execute(
                    "SELECT key_id, public_key FROM table_keys WHERE table_id = %s ORDER BY first_seen",
                    (table,),
                ).fetchall()
            ]
            ring = _ring([], pinned) if pinned else KeyRing()
            if not pinned:
                for entry in listed:  # the archive already judged them (pinned, tofu, endorsed)
                    ring.add(entry["public_key"])
            check = ChainCheck(ring)
            with conn.transaction():
                cur = conn.cursor(name="verify")
                cur.itersize = 1000
                cur.execute(
                    "SELECT e.seq, e.event_id, e.payload::text, s.line FROM events e"
                    " LEFT JOIN signed_lines s ON s.event_id = e.event_id"
                    " WHERE e.table_id = %s AND e.ts >= %s AND e.ts < %s ORDER BY e.seq",
                    (table, lo, hi),
                )

                def rows() -> Iterator[tuple[str, bytes]]:
                    for seq, event_id, payload, line in cur:
                        where = f"archive table {table} seq {seq} ({visible(str(event_id))})"
                        stored = json.loads(payload)
                        if line is None:
                            if "sig" in stored:
                                raise Broken(f"{where}: its signed line is missing")
                            yield where, str(payload).encode()
                            check.head = None  # an unsigned event's bytes are not kept
                            continue
                        try:
                            signed = json.loads(line)
                        except ValueError:
                            signed = None
                        if signed != stored:
                            raise Broken(
                                f"{where}: the archived event differs from the line its table signed"
                            )
                        if stored.get("seq") != seq or stored.get("event_id") != event_id:
                            raise Broken(
                                f"{where}: the row holds event seq {stored.get('seq')!r}: rows swapped"
                            )
                        yield where, str(line).encode()

                _walk(check, rows())
                cur.close()
    except psycopg.Error as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RuntimeFailure(f"archive: {text}") from None
    return _summary(f"archive table {table} {start}..{to}", check)


# --- a shoe report's events --------------------------------------------------------


def _events(path: str, pinned: list[str] | None) -> str:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_EVENTS_FILE_BYTES:
            raise RuntimeFailure(
                f"{visible(path)}: {size} bytes; an events file is at most {MAX_EVENTS_FILE_BYTES}"
            )
        data = p.read_bytes()
    except OSError as exc:
        raise RuntimeFailure(f"{visible(path)}: {exc.strerror or exc}") from None
    lines = list(lines_of(data))
    try:
        head = json.loads(lines[0]) if lines else None
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("format") != REPORT_FORMAT:
        raise RuntimeFailure(f"{visible(path)}: not a shoe report's events (history report --events)")
    listed = head.get("keys")
    keys: list[dict[str, Any]] = []
    if isinstance(listed, list):
        keys = [k for k in listed if isinstance(k, dict)]
    check = ChainCheck(_ring(keys, pinned))
    _walk(check, ((f"report {visible(path)} line {n}", line) for n, line in enumerate(lines[1:], 2)))
    table, shoe = visible(str(head.get("table"))), visible(str(head.get("shoe")))
    what = f"shoe report {visible(path)} (table {table} shoe {shoe})"
    trust = "" if pinned else "; the keys are the report's own: compare them with the table's"
    return _summary(what, check) + trust


def run(args: argparse.Namespace) -> int:
    pinned = args.key
    try:
        if args.journal is not None:
            line = _journal(os.fspath(args.journal), pinned)
        elif args.events is not None:
            line = _events(os.fspath(args.events), pinned)
        elif args.dsn is not None:
            line = _archive(args.dsn, args.table, args.day_from, args.day_to, pinned)
        else:
            line = _from_config(args, pinned)
    except Broken as exc:
        print(f"BROKEN: {exc}")
        return 1
    print(line)
    return 0


def _from_config(args: argparse.Namespace, pinned: list[str] | None) -> str:
    """``-c``: a table's config (its journal) or an archiver's (its dsn)."""
    from controller.errors import ConfigError

    try:
        from controller.config import load_config

        return _journal(load_config(args.config).journal, pinned)
    except ConfigError as table_error:
        try:
            from controller.archive.config import load_archive_config

            cfg = load_archive_config(args.config)
        except (ConfigError, ImportError):
            raise table_error from None
        return _archive(cfg.dsn, args.table, args.day_from, args.day_to, pinned)
