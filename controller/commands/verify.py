"""``shoe-controller verify``: check a table's signed, chained record in
a journal, the archive or a shoe report's events, and print one line: the
first broken link, bad signature or missing end (exit 1), or what was
verified (exit 0). Expected errors (no such file, no database, a bad
range) are one line too (``ExpectedError``), never a traceback.

What is checked, event by event in seq order (``signing.ChainCheck``): each
signed event's signature under the table's keys (the source's own list,
or only ``--key``), its ``prev`` against the digest of the event before it
(a new epoch's first event says so with ``chain_reset``), seqs strictly
increasing, no unsigned event after a signed one; in a journal, each row's
seq and id against its event; in the archive, each ``events`` row against
its signed line. The ends, which no link covers, are held to what the
record says it covers (docs/events.md, "What verify can and cannot
tell"): a journal's first event to seq 1 or retention's last pruned link,
its last to its high-water mark and its outputs' delivery marks; an
archive range's ends to the archived events around it, else to the
archive's mark; a shoe report's to its shoe's ``shoe.started`` and
``shoe.ended``. The line says what each end was checked against.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from controller.errors import RuntimeFailure, UsageError
from controller.journal import HWM_SUFFIX
from controller.signing import ChainCheck, KeyRing, lines_of, link_of
from controller.textsafe import visible

#: The largest shoe report events file read (a 12-deck shoe is about 1 MB).
MAX_EVENTS_FILE_BYTES = 64 * 1024 * 1024
#: The longest archive day range verified in one run.
MAX_DAYS = 366
#: The largest high-water mark read (the daemon writes 512 bytes).
MAX_HWM_BYTES = 4096
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


def _summary(what: str, check: ChainCheck, ends: str = "") -> str:
    if check.count == 0:
        return f"verified {what}: no events"
    if check.signed == 0:
        # nothing vouched for: not a pass (signing off, or written before it)
        raise Broken(f"{what}: {check.count} events, none signed: nothing to verify")
    keys = ", ".join(sorted(check.ring.keys)) or "none"
    resets = f", {check.resets} new epoch(s) after a lost journal" if check.resets else ""
    return (
        f"verified {what}: {check.count} events, seq {check.first_seq}..{check.last_seq},"
        f" {check.signed} signed (keys {keys}), chain unbroken{resets}{ends}"
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
            check = ChainCheck(_ring(listed if isinstance(listed, list) else [], pinned), resets_link=True)
            meta = dict(
                db.execute(
                    "SELECT key, value FROM meta WHERE key IN ('retired_seq', 'retired_link', 'journal_id')"
                ).fetchall()
            )
            retired = _int(meta.get("retired_seq")) or 0
            # the first event links to the chain's start, or to the newest
            # event retention pruned (unknown for a journal pruned before
            # the link was kept: then not checked)
            if retired == 0 or meta.get("retired_link") is not None:
                check.anchored = False
                check.head = meta.get("retired_link") if retired else None

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
                        if (
                            last == -1
                            and seq != retired + 1
                            and not (isinstance(ev, dict) and "chain_reset" in ev)
                            and not _pruned_meanwhile(db, check, int(seq))
                        ):
                            since = (
                                f"retention pruned through seq {retired}"
                                if retired
                                else "a journal starts at seq 1"
                            )
                            raise Broken(
                                f"{where}: the journal's first event, but {since}:"
                                f" {_span(retired + 1, int(seq) - 1)} deleted"
                            )
                        last = max(last, 0)
                        yield where, line
                    last = int(batch[-1][0])

            # what the journal's records say it holds, read before its events:
            # a daemon appending meanwhile only adds events past them
            delivered = db.execute("SELECT output, seq FROM marks ORDER BY seq DESC LIMIT 1").fetchone()
            committed = _hwm(path, meta.get("journal_id"))
            _walk(check, rows())
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise RuntimeFailure(f"{visible(path)}: not a readable shoe-controller journal: {exc}") from None
    ends = _journal_ends(path, check, retired, committed, delivered)
    return _summary(f"journal {visible(path)}", check, ends)


def _pruned_meanwhile(db: sqlite3.Connection, check: ChainCheck, first: int) -> bool:
    """Whether the daemon's retention pruned up to just below ``first``
    since the journal's ``meta`` was read (a journal in use): then the
    first event links to the newest event pruned, as ``meta`` says now."""
    rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('retired_seq', 'retired_link')"))
    if (_int(rows.get("retired_seq")) or 0) + 1 != first:
        return False
    check.head, check.anchored = rows.get("retired_link"), rows.get("retired_link") is None
    return True


def _span(first: int, last: int) -> str:
    return f"seq {first} was" if first == last else f"seq {first}..{last} were"


def _int(text: Any) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _hwm(path: str, journal_id: Any) -> int | None:
    """The seq the journal's high-water mark (``<journal>.hwm``, kept by the
    daemon beside it) says was committed, when it is this journal's."""
    try:
        with open(path + HWM_SUFFIX, "rb") as f:
            raw = f.read(MAX_HWM_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_HWM_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("journal") != journal_id or journal_id is None:
        return None
    committed = data.get("committed")
    return committed if isinstance(committed, int) and not isinstance(committed, bool) else None


def _journal_ends(
    path: str, check: ChainCheck, retired: int, committed: int | None, delivered: tuple[Any, Any] | None
) -> str:
    """Where the journal's first and last events were checked against; a
    last event below what the journal's own records say it holds (its
    high-water mark's committed seq, an output's delivery mark) is
    ``Broken``."""
    last = max(check.last_seq or 0, retired)
    claims: list[tuple[int, str]] = []
    if committed is not None:
        claims.append(
            (committed, f"its high-water mark {visible(path)}{HWM_SUFFIX} says seq {committed} was committed")
        )
    if delivered is not None and _int(delivered[1]) is not None:
        seq = int(delivered[1])
        claims.append((seq, f"output {visible(str(delivered[0]))} was marked delivered through seq {seq}"))
    for seq, what in sorted(claims, reverse=True):
        if seq > last:
            raise Broken(
                f"journal {visible(path)}: its last event is seq {last}, but {what}:"
                f" {_span(last + 1, seq)} deleted"
            )
    if not retired:
        start = "the chain's start (seq 1, or a new epoch's chain_reset)"
    elif check.anchored:
        start = f"nothing (retention pruned through seq {retired} before the link was kept)"
    else:
        start = f"the last event retention pruned (seq {retired})"
    end = (
        f"its high-water mark (seq {committed})"
        if committed is not None
        else f"no high-water mark ({visible(path)}{HWM_SUFFIX} missing or another journal's)"
    )
    return f"; first event checked against {start}, last against {end}"


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
    table, first_day, to = _archive_scope(table, day_from, day_to)
    import psycopg

    lo = dt.datetime.combine(first_day, dt.time(), dt.UTC)
    hi = dt.datetime.combine(to + dt.timedelta(days=1), dt.time(), dt.UTC)
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            check = ChainCheck(_archive_ring(conn, table, pinned))
            mark = conn.execute(
                "SELECT first_seq, seq, event_id FROM archive_table_marks WHERE table_id = %s", (table,)
            ).fetchone()
            lo_seq, hi_seq = conn.execute(
                "SELECT min(seq), max(seq) FROM events WHERE table_id = %s AND ts >= %s AND ts < %s",
                (table, lo, hi),
            ).fetchone() or (None, None)
            start = _archive_start(conn, check, table, lo_seq, mark)
            with conn.transaction():
                cur = conn.cursor(name="verify")
                cur.itersize = 1000
                cur.execute(
                    "SELECT e.seq, e.event_id, e.payload::text, s.line FROM events e"
                    " LEFT JOIN signed_lines s ON s.event_id = e.event_id"
                    " WHERE e.table_id = %s AND e.ts >= %s AND e.ts < %s ORDER BY e.seq",
                    (table, lo, hi),
                )
                _walk(check, _archived_rows(cur, check, table))
                cur.close()
            end = _archive_end(conn, check, table, hi_seq, mark)
    except psycopg.Error as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RuntimeFailure(f"archive: {text}") from None
    return _summary(
        f"archive table {table} {first_day}..{to}",
        check,
        f"; first event checked against {start}, last against {end}",
    )


def _archive_scope(
    table: str | None, day_from: str | None, day_to: str | None
) -> tuple[str, dt.date, dt.date]:
    """The table, first and last day of the archive to verify, the options
    checked (one table, at most ``MAX_DAYS`` days)."""
    from controller.config import table_problem

    if table is None:
        raise UsageError("verify: the archive is verified per table: give --table")
    problem = table_problem(table)
    if problem is not None:
        raise UsageError(f"--table: {problem}")
    to = _day(day_to, "--to", dt.datetime.now(dt.UTC).date())
    first_day = _day(day_from, "--from", to - dt.timedelta(days=30))
    if first_day > to:
        raise UsageError(f"--from {first_day} is after --to {to}")
    if (to - first_day).days + 1 > MAX_DAYS:
        raise UsageError(
            f"--from {first_day} --to {to}: {(to - first_day).days + 1} days; at most {MAX_DAYS} in one run"
        )
    return table, first_day, to


def _archive_ring(conn: Any, table: str, pinned: list[str] | None) -> KeyRing:
    """The keys pinned, or else the ones the archive lists for ``table``
    (the archive already judged them: pinned, tofu, endorsed)."""
    listed = [
        {"key_id": str(k), "public_key": str(p)}
        for k, p in conn.execute(
            "SELECT key_id, public_key FROM table_keys WHERE table_id = %s ORDER BY first_seen",
            (table,),
        ).fetchall()
    ]
    ring = _ring([], pinned) if pinned else KeyRing()
    if not pinned:
        for entry in listed:
            ring.add(entry["public_key"])
    return ring


def _archived_rows(cur: Any, check: ChainCheck, table: str) -> Iterator[tuple[str, bytes]]:
    """Each archived event of ``cur`` as the bytes its table signed (an
    unsigned one as stored, where the chain starts again), refused where
    the row and its signed line disagree."""
    for seq, event_id, payload, line in cur:
        where = f"archive table {table} seq {seq} ({visible(str(event_id))})"
        stored = json.loads(payload)
        if line is None:
            if "sig" in stored:
                raise Broken(f"{where}: its signed line is missing")
            yield where, str(payload).encode()
            check.head = None  # an unsigned event's bytes are not kept
            check.anchored = True
            continue
        try:
            signed = json.loads(line)
        except ValueError:
            signed = None
        if signed != stored:
            raise Broken(f"{where}: the archived event differs from the line its table signed")
        if stored.get("seq") != seq or stored.get("event_id") != event_id:
            raise Broken(f"{where}: the row holds event seq {stored.get('seq')!r}: rows swapped")
        yield where, str(line).encode()


_BEFORE = (
    "SELECT e.seq, e.event_id, s.line FROM events e LEFT JOIN signed_lines s ON s.event_id = e.event_id"
    " WHERE e.table_id = %s AND e.seq < %s ORDER BY e.seq DESC LIMIT 1"
)
_AFTER = (
    "SELECT e.seq, e.event_id, s.line FROM events e LEFT JOIN signed_lines s ON s.event_id = e.event_id"
    " WHERE e.table_id = %s AND e.seq > %s ORDER BY e.seq LIMIT 1"
)


def _neighbour(conn: Any, table: str, seq: int, after: bool) -> tuple[int, str, str | None] | None:
    """The table's archived event just before (or after) ``seq``, whatever
    its day: (seq, event_id, signed line or None)."""
    row = conn.execute(_AFTER if after else _BEFORE, (table, seq)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), None if row[2] is None else str(row[2]))


def _archive_start(conn: Any, check: ChainCheck, table: str, lo_seq: Any, mark: Any) -> str:
    """Anchor the range's first event: on the archived event before it
    (whose digest its ``prev`` must hold), or, when there is none, on the
    archive's mark (``first_seq``: the first seq it holds the table from,
    moved up by retention) and the chain's start."""
    if lo_seq is None:
        return "nothing (no events)"
    before = _neighbour(conn, table, int(lo_seq), after=False)
    if before is not None:
        if before[2] is None:
            return f"nothing (the event before it, seq {before[0]}, is unsigned)"
        check.head, check.anchored = link_of(before[2].encode()), False
        return f"the archived event before the range (seq {before[0]})"
    if mark is not None and int(mark[0]) < int(lo_seq):
        raise Broken(
            f"archive table {table}: its first archived event is seq {lo_seq}, but the archive's mark"
            f" holds the table from seq {mark[0]}: {_span(int(mark[0]), int(lo_seq) - 1)} deleted"
        )
    if int(lo_seq) == 1:
        check.anchored = False  # the chain's start: prev null
        return "the chain's start (seq 1)"
    return f"the archive's mark (the table is archived from seq {lo_seq}, mid-chain)"


def _archive_end(conn: Any, check: ChainCheck, table: str, hi_seq: Any, mark: Any) -> str:
    """Check the range's last event: the archived event after it must link
    to it, or, when there is none, the archive's mark must not hold the
    table further."""
    if hi_seq is None:
        return "nothing (no events)"
    after = _neighbour(conn, table, int(hi_seq), after=True)
    if after is not None:
        seq, event_id, line = after
        if line is None:
            return f"nothing (the event after it, seq {seq}, is unsigned)"
        where = f"archive table {table} seq {seq} ({visible(event_id)}), the event after the range"
        problem = dataclasses.replace(check).feed(where, line.encode())  # the range's own counts kept
        if problem is not None:
            raise Broken(problem)
        return f"the archived event after the range (seq {seq})"
    if mark is not None and int(mark[1]) > int(hi_seq):
        raise Broken(
            f"archive table {table}: its last archived event is seq {hi_seq}, but the archive's mark"
            f" holds the table through seq {mark[1]} ({visible(str(mark[2]))}):"
            f" {_span(int(hi_seq) + 1, int(mark[1]))} deleted"
        )
    return f"the archive's mark (seq {mark[1]})" if mark is not None else "nothing (no mark for the table)"


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
    _report_ends(path, head.get("shoe"), lines[1:])
    trust = "" if pinned else "; the keys are the report's own: compare them with the table's"
    return _summary(what, check, "; from the shoe's shoe.started to its shoe.ended") + trust


def _report_ends(path: str, shoe: Any, events: list[bytes]) -> None:
    """A shoe report holds its shoe from the shoe's ``shoe.started`` to its
    ``shoe.ended`` (whose ``chain_head`` quotes the chain's head then):
    a first or last event deleted leaves another in its place."""
    if not events:
        raise Broken(f"report {visible(path)}: no events; a shoe report runs from shoe.started to shoe.ended")
    for n, line, want, gone in (
        (2, events[0], "shoe.started", "before"),
        (len(events) + 1, events[-1], "shoe.ended", "after"),
    ):
        ev = json.loads(line)  # (the walk read every line as a JSON object)
        if ev.get("type") != want or ev.get("shoe") != shoe:
            kind = visible(str(ev.get("type")))[:40]
            raise Broken(
                f"report {visible(path)} line {n}: the report's {'first' if gone == 'before' else 'last'}"
                f" event is a {kind} (seq {visible(str(ev.get('seq')))[:20]}), not shoe"
                f" {visible(str(shoe))[:80]}'s {want}: the events {gone} it were deleted"
            )


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
