"""Surveillance review: read-only queries over a daemon's journal,
used by ``shoe-controller history`` and the board's history pages.

Owns: opening a journal so that reading it can never disturb the daemon
writing it, and the questions surveillance asks of it: the shoes in a
journal; the coups of a shoe or of a time range; one coup's whole timeline
(every card with its read time and position, the misdeals and how each was
resolved, the supervisor commands that touched the coup, the settlement or
the void); every coup with a given dealing error (docs/dealing-errors.md); what a
shoe report shows (``shoe_report``).

**Read-only, safe while the daemon runs.** The journal is opened with
SQLite's ``mode=ro`` and every query runs in one read transaction, so it
sees one consistent snapshot while the daemon commits beside it (WAL:
readers never block the writer, the writer never blocks readers). A
read-only connection to a WAL database whose ``-wal``/``-shm`` files are
absent (the daemon stopped cleanly) would create them and leave them behind,
owned by whoever ran ``history``, which can stop the daemon from opening its
own journal; so then the file is opened ``immutable`` (no side files, no
locks) and its identity (inode, size, mtime) is checked after the query: if
a daemon started and changed it meanwhile, the query runs again, normally.

**What the journal does not hold.** The daemon journals every supervisor
command (its id, what it asked) but not the reply it sent. A command's
outcome is read from the events the engine made at that command's time:
``reply.ok`` is true when they show its effect (the card entered, the misdeal
corrected, the coup voided, the shoe started or ended), false for a command
the daemon refused before the engine (journalled with its error) and
``null`` when no event shows an effect: the engine refused it, or it was one
card of several entered for a sequence gap (the gap is closed, by the last
one, only once every missing card is entered). ``reply.recorded`` is always
false, to say so.

Bounds: at most ``MAX_LIMIT`` rows per query (default ``DEFAULT_LIMIT``;
``truncated`` says when more matched), a time of at most 64 characters, a
shoe id of at most 64, a coup number 1..``MAX_COUP``, a code of at most 40
characters. Every expected problem raises a ``HistoryError`` (or its
``UsageError`` twin for a malformed argument) with a one-line message.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from controller.commands_schema import CommandError, command_dict, parse_journalled
from controller.errors import RuntimeFailure, UsageError
from controller.events import format_ts
from controller.journal import SCHEMA_VERSION

DEFAULT_LIMIT = 200
MAX_LIMIT = 10_000
MAX_COUP = 10_000
MAX_TIME_CHARS = 64
MAX_SHOE_CHARS = 64
MAX_CODE_CHARS = 40

#: The dealing errors a misdeal, a void or an alert can carry: docs/dealing-errors.md,
#: then the engine's own (a supervisor's void, a shoe ended or a re-deal
#: announced mid-coup, a RESULT the dealer never pressed). A code outside this list is still found when the
#: journal holds it (a newer engine's).
DEALING_ERRORS: tuple[str, ...] = (
    "EXTRA_CARD",
    "PREMATURE_RESULT",
    "UNREAD_CARD",
    "SEQUENCE_GAP",
    "FOREIGN_CARD",
    "SHUFFLE_MISMATCH",
    "SHOE_EXHAUSTED",
    "CUT_CARD_OVERRUN",
    "BURN_MISMATCH",
    "WRONG_HAND",
    "SHOE_DISAGREES",
    "DEVICE_FAULT",
    "SUPERVISOR_VOID",
    "SHOE_ENDED",
    "REDEAL",
    "MISSING_RESULT",
)

_CODE_RE = re.compile(r"[A-Z][A-Z0-9_]*")
_RELATIVE_RE = re.compile(r"(\d{1,7})\s*(s|m|h|d)")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: Retries when an ``immutable`` read saw the file change under it.
_RETRIES = 3

T = TypeVar("T")


class HistoryError(RuntimeFailure):
    """The journal cannot answer: missing, not a journal, unreadable."""


class NotFound(HistoryError):
    """No such shoe, coup or code in this journal."""


class NotEnded(HistoryError):
    """A shoe report was asked for a shoe still in play."""


class QueryError(UsageError):
    """A malformed argument: a time, a limit, a code, a coup number."""


# --- arguments ------------------------------------------------------------


def parse_time(text: str, *, now: float | None = None, name: str = "time") -> float:
    """A time given by a user, as Unix seconds. Accepted: RFC 3339 / ISO 8601
    (``2026-11-23T04:30:00Z``, ``2026-11-23T05:30:00+01:00``,
    ``2026-11-23 04:30``, ``2026-11-23``: a time without a zone is UTC,
    like every time in the journal), ``now``, or a time ago (``90s``, ``15m``,
    ``2h``, ``3d``). Raises ``QueryError`` with one line."""
    raw = text.strip()
    if not raw or len(raw) > MAX_TIME_CHARS:
        raise QueryError(f"{name}: {text[:MAX_TIME_CHARS]!r} is not a time (empty or over 64 characters)")
    now = time.time() if now is None else now
    if raw.lower() == "now":
        return now
    m = _RELATIVE_RE.fullmatch(raw.lower())
    if m:
        return now - int(m.group(1)) * _UNITS[m.group(2)]
    iso = raw[:-1] + "+00:00" if raw[-1:] in "zZ" else raw
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise QueryError(
            f"{name}: {raw!r} is not a time; give e.g. 2026-11-23T04:30:00Z, 2026-11-23 04:30 (UTC),"
            " 2026-11-23, now, or a time ago such as 15m, 2h, 3d"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_limit(value: int | str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise QueryError(f"limit: {str(value)[:20]!r} is not a number (1..{MAX_LIMIT})") from None
    if not 1 <= n <= MAX_LIMIT:
        raise QueryError(f"limit: {n} is out of range (1..{MAX_LIMIT})")
    return n


def check_shoe(shoe: str) -> str:
    if not shoe or len(shoe) > MAX_SHOE_CHARS or "/" in shoe or not shoe.isprintable():
        raise QueryError(
            f"shoe: {shoe[:MAX_SHOE_CHARS]!r} is not a shoe id (1..64 printable characters, no /)"
        )
    return shoe


def check_coup(coup: int | str) -> int:
    try:
        n = int(coup)
    except (TypeError, ValueError):
        raise QueryError(f"coup: {str(coup)[:20]!r} is not a coup number (1..{MAX_COUP})") from None
    if not 1 <= n <= MAX_COUP:
        raise QueryError(f"coup: {n} is out of range (1..{MAX_COUP})")
    return n


def check_code(code: str) -> str:
    c = code.strip().upper()
    if not c or len(c) > MAX_CODE_CHARS or not _CODE_RE.fullmatch(c):
        raise QueryError(f"code: {code[:MAX_CODE_CHARS]!r} is not a dealing error code such as UNREAD_CARD")
    return c


def ts_to_epoch(ts: str) -> float:
    """``2026-11-22T06:56:11.125Z`` (the journal's own format) -> Unix seconds."""
    try:
        head, _, frac = ts.rstrip("Z").partition(".")
        sec = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))
        return sec + (int(frac) / 10 ** len(frac) if frac else 0.0)
    except (ValueError, OverflowError):
        return 0.0


# --- results --------------------------------------------------------------


@dataclass
class Page:
    """Rows of one query: ``truncated`` when more matched than ``limit``."""

    rows: list[dict[str, Any]]
    limit: int
    truncated: bool = False
    columns: tuple[str, ...] = ()


@dataclass
class _Shoe:
    id: str
    lo: int
    hi: int
    first_ts: str
    last_ts: str
    started: dict[str, Any] | None = None
    ended: dict[str, Any] | None = None
    span: tuple[float, float] = (0.0, float("inf"))
    extra: dict[str, Any] = field(default_factory=dict)


SHOE_COLUMNS = ("shoe", "started", "ended", "coups", "settled", "void", "banker", "player", "tie", "status")
COUP_COLUMNS = (
    "shoe",
    "coup",
    "ts",
    "status",
    "winner",
    "player",
    "player_total",
    "banker",
    "banker_total",
    "natural",
    "pairs",
    "tags",
    "misdeals",
    "void_code",
    "corrected",
)
ENTRY_COLUMNS = ("ts", "seq", "kind", "position", "card", "code", "detail")
ERROR_COLUMNS = ("shoe", "coup", "ts", "code", "first_action", "resolution", "outcome", "detail")


# --- the reader -----------------------------------------------------------


class Reader:
    """A journal opened for reading only. Each query opens the file, reads
    one snapshot and closes it again, so a ``Reader`` may live as long as a
    web service and is safe to share between threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    # --- plumbing ----------------------------------------------------------

    def _connect(self, immutable: bool) -> sqlite3.Connection:
        quoted = urllib.parse.quote(str(self.path.resolve()))
        uri = f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")
        db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10.0)
        db.execute("PRAGMA busy_timeout = 10000")
        return db

    def _identity(self) -> tuple[int, int, int, bool]:
        st = self.path.stat()
        return st.st_ino, st.st_size, st.st_mtime_ns, Path(f"{self.path}-wal").exists()

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on one read-only snapshot of the journal."""
        where = str(self.path)
        for _ in range(_RETRIES):
            try:
                before = self._identity()
            except FileNotFoundError:
                # (the CLI says how to name one: commands/history.missing_journal)
                raise HistoryError(f"{where}: no journal there") from None
            except OSError as exc:
                raise HistoryError(f"{where}: cannot read: {exc.strerror or exc}") from None
            if not self.path.is_file():
                raise HistoryError(f"{where}: not a journal file (a directory or a device)")
            immutable = not before[3]
            try:
                with closing(self._connect(immutable)) as db:
                    db.execute("BEGIN")
                    try:
                        self._check(db)
                        result = fn(db)
                    finally:
                        db.execute("COMMIT")
            except sqlite3.Error as exc:
                if _shm_missing(self.path, exc):
                    raise HistoryError(
                        f"{where}: its -wal is there without its -shm, which a read-only reader cannot"
                        " create (a read-only file system, as under the board's unit): let the daemon"
                        " open it once (it recovers the WAL), or read a copy of the journal, -wal"
                        " included, in a writable directory"
                    ) from None
                raise HistoryError(f"{where}: {_explain(exc)}") from None
            if not immutable:
                return result
            try:
                if self._identity() == before:
                    return result
            except OSError:
                pass
        raise HistoryError(f"{where}: the journal kept changing under a read; try again")

    def _check(self, db: sqlite3.Connection) -> None:
        tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"events", "inputs", "meta"} <= tables:
            raise HistoryError(
                f"{self.path}: a SQLite file, but not a shoe-controller journal (no events table)"
            )
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        try:
            version = int(row[0]) if row is not None else 0
        except ValueError:
            version = -1
        if not 1 <= version <= SCHEMA_VERSION:
            raise HistoryError(
                f"{self.path}: journal schema version {row[0] if row else None!r} is not one this build"
                f" reads (1..{SCHEMA_VERSION})"
            )

    # --- shoes -------------------------------------------------------------

    def _shoes(self, db: sqlite3.Connection) -> list[_Shoe]:
        rows = db.execute(
            "SELECT shoe, min(seq), max(seq), min(ts), max(ts) FROM events WHERE shoe IS NOT NULL"
            " GROUP BY shoe ORDER BY min(seq)"
        ).fetchall()
        shoes = [_Shoe(str(r[0]), int(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]
        by_id = {s.id: s for s in shoes}
        for shoe, kind, text in db.execute(
            "SELECT shoe, type, json FROM events WHERE type IN ('shoe.started', 'shoe.ended') ORDER BY seq"
        ):
            s = by_id.get(shoe)
            if s is None:
                continue
            ev = json.loads(text)
            if kind == "shoe.started":
                s.started = ev
            else:
                s.ended = ev
        # a shoe's commands: from its start to the next shoe's (a command
        # after shoe.ended still meets the ended shoe in the engine)
        for i, s in enumerate(shoes):
            start = ts_to_epoch(s.started["ts"] if s.started else s.first_ts)
            end = float("inf")
            if i + 1 < len(shoes):
                nxt = shoes[i + 1]
                end = ts_to_epoch(nxt.started["ts"] if nxt.started else nxt.first_ts)
            s.span = (start, end)
        return shoes

    def _shoe(self, db: sqlite3.Connection, shoe: str) -> _Shoe:
        check_shoe(shoe)
        for s in self._shoes(db):
            if s.id == shoe:
                return s
        raise NotFound(f"no shoe {shoe!r} in {self.path}{self._pruned_note(db)}")

    def _pruned_note(self, db: sqlite3.Connection) -> str:
        row = db.execute("SELECT value FROM meta WHERE key = 'retired_seq'").fetchone()
        if row is None:
            return ""
        return f" (retention removed its events up to seq {row[0]}; see journal_retention_days)"

    def shoes(self, limit: int | str | None = None) -> Page:
        """Every shoe in the journal, newest last (at most ``limit``: the newest)."""
        n = parse_limit(limit)

        def q(db: sqlite3.Connection) -> Page:
            shoes = self._shoes(db)
            counts: dict[str, dict[str, int]] = {s.id: {} for s in shoes}
            for shoe, winner, k in db.execute(
                "SELECT shoe, json_extract(json, '$.winner'), count(*) FROM events"
                " WHERE type = 'coup.result' AND json_extract(json, '$.demo') = 0 GROUP BY 1, 2"
            ):
                if shoe in counts:
                    counts[shoe][str(winner)] = int(k)
            for shoe, k in db.execute(
                "SELECT shoe, count(*) FROM events WHERE type = 'coup.void' GROUP BY 1"
            ):
                if shoe in counts:
                    counts[shoe]["void"] = int(k)
            for shoe, k in db.execute(
                "SELECT shoe, max(json_extract(json, '$.coup')) FROM events"
                " WHERE type IN ('coup.result', 'coup.void', 'card') GROUP BY 1"
            ):
                if shoe in counts:
                    counts[shoe]["coups"] = int(k or 0)
            rows = []
            for s in shoes[-n:]:
                c = counts[s.id]
                settled = c.get("banker", 0) + c.get("player", 0) + c.get("tie", 0)
                status = "ended" if s.ended else ("in play" if s.started else "incomplete (start pruned)")
                rows.append(
                    {
                        "shoe": s.id,
                        "started": s.started["ts"] if s.started else s.first_ts,
                        "ended": s.ended["ts"] if s.ended else None,
                        "coups": int(s.ended["coups"]) if s.ended else c.get("coups", 0),
                        "settled": settled,
                        "void": c.get("void", 0),
                        "banker": c.get("banker", 0),
                        "player": c.get("player", 0),
                        "tie": c.get("tie", 0),
                        "status": status,
                    }
                )
            return Page(rows, n, len(shoes) > n, SHOE_COLUMNS)

        return self.read(q)

    # --- coups -------------------------------------------------------------

    def coups(
        self,
        shoe: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | str | None = None,
    ) -> Page:
        """The coups of a shoe (every coup number seen, settled, void or
        still open), or those closed (settled or voided) in ``[since, until)``,
        in the order they were dealt; at most ``limit``."""
        n = parse_limit(limit)
        if shoe is None and since is None and until is None:
            raise QueryError("coups: give --shoe ID, or --since and/or --until")
        lo_ts = format_ts(since) if since is not None else None
        hi_ts = format_ts(until) if until is not None else None
        if lo_ts is not None and hi_ts is not None and hi_ts <= lo_ts:
            raise QueryError(f"coups: --until ({hi_ts}) is not after --since ({lo_ts})")

        def q(db: sqlite3.Connection) -> Page:
            if shoe is not None:
                s = self._shoe(db, shoe)
                events = _events(
                    db,
                    "type IN ('card', 'misdeal', 'coup.result', 'coup.void', 'coup.corrected')"
                    " AND seq BETWEEN ? AND ?"
                    " AND json_extract(json, '$.coup') IS NOT NULL",
                    (s.lo, s.hi),
                )
                coups = _group_coups(events)
                rows = [
                    _coup_row(c)
                    for c in coups.values()
                    if _in_range(c.get("closed_ts") or c["first_ts"], lo_ts, hi_ts)
                ]
            else:
                where = ["type IN ('coup.result', 'coup.void', 'coup.corrected')"]
                args: list[Any] = []
                if lo_ts is not None:
                    where.append("ts >= ?")
                    args.append(lo_ts)
                if hi_ts is not None:
                    where.append("ts < ?")
                    args.append(hi_ts)
                closing_events = _events(db, " AND ".join(where), args, limit=n + 1)
                keys = {(e["shoe"], e["coup"]) for e in closing_events}
                shoes = {e["shoe"] for e in closing_events}
                misdeals = [
                    e
                    for sh in shoes
                    for e in _events(db, "type = 'misdeal' AND shoe = ?", (sh,))
                    if (e["shoe"], e.get("coup")) in keys
                ]
                coups = _group_coups(sorted([*closing_events, *misdeals], key=lambda e: e["seq"]))
                rows = [_coup_row(c) for c in sorted(coups.values(), key=lambda c: c["order"])]
            return Page(rows[:n], n, len(rows) > n, COUP_COLUMNS)

        return self.read(q)

    # --- one coup ----------------------------------------------------------

    def timeline(self, shoe: str, coup: int | str) -> dict[str, Any]:
        """One coup's whole story, in time order (see the module docstring
        for what ``commands`` can and cannot say)."""
        number = check_coup(coup)

        def q(db: sqlite3.Connection) -> dict[str, Any]:
            s = self._shoe(db, shoe)
            own = _events(
                db,
                "seq BETWEEN ? AND ? AND type IN ('card', 'misdeal', 'coup.result', 'coup.void',"
                " 'coup.corrected', 'security.alert', 'shoe.cut_card') AND json_extract(json, '$.coup') = ?",
                (s.lo, s.hi, number),
            )
            if not own:
                top = db.execute(
                    "SELECT max(json_extract(json, '$.coup')) FROM events WHERE seq BETWEEN ? AND ?"
                    " AND type IN ('card', 'coup.result', 'coup.void')",
                    (s.lo, s.hi),
                ).fetchone()[0]
                have = f"its coups are 1..{top}" if top else "it has no coups"
                raise NotFound(f"shoe {shoe} has no coup {number} in {self.path} ({have})")
            lo, hi = own[0]["seq"], own[-1]["seq"]
            device = _events(db, "seq BETWEEN ? AND ? AND type = 'device.status'", (lo, hi))
            commands = _shoe_commands(db, s, number)
            return _timeline(s, number, own, device, commands)

        return self.read(q)

    # --- dealing errors ----------------------------------------------------

    def errors(
        self,
        code: str,
        shoe: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | str | None = None,
    ) -> Page:
        """Every coup (in the order dealt) where ``code`` was raised, with how
        it was resolved and the coup's outcome; an alert-only code (such as
        BURN_MISMATCH at the burn) gives a row per alert."""
        c = check_code(code)
        n = parse_limit(limit)
        lo_ts = format_ts(since) if since is not None else None
        hi_ts = format_ts(until) if until is not None else None

        def q(db: sqlite3.Connection) -> Page:
            where = "type IN ('misdeal', 'coup.void', 'security.alert') AND json_extract(json, '$.code') = ?"
            args: list[Any] = [c]
            if shoe is not None:
                s = self._shoe(db, shoe)
                where += " AND seq BETWEEN ? AND ?"
                args += [s.lo, s.hi]
            if lo_ts is not None:
                where += " AND ts >= ?"
                args.append(lo_ts)
            if hi_ts is not None:
                where += " AND ts < ?"
                args.append(hi_ts)
            found = _events(db, where, args)
            if not found and c not in DEALING_ERRORS:
                raise QueryError(
                    f"code: {c} is not a dealing error this journal or docs/dealing-errors.md knows; one of: "
                    + ", ".join(DEALING_ERRORS)
                )
            rows = _error_rows(db, found, c)
            return Page(rows[:n], n, len(rows) > n, ERROR_COLUMNS)

        return self.read(q)

    # --- the shoe report ----------------------------------------------------

    def shoe_lines(self, shoe: str) -> tuple[list[Any], list[str]]:
        """A shoe's part of the table's signed chain: the key list, and
        every event line as journalled from the shoe's ``shoe.started`` to
        its ``shoe.ended`` (other events between them included: the chain
        runs through them), for ``history report --events``; only for an
        ended shoe (``NotEnded``)."""

        def q(db: sqlite3.Connection) -> tuple[list[Any], list[str]]:
            s = self._shoe(db, shoe)
            if s.ended is None or s.started is None:
                raise NotEnded(
                    f"shoe {shoe} has not ended (or its start was pruned): its events are written"
                    " once it runs from shoe.started to shoe.ended"
                )
            row = db.execute("SELECT value FROM meta WHERE key = 'signing_keys'").fetchone()
            keys = json.loads(row[0]) if row else []
            lines = [
                str(r[0])
                for r in db.execute(
                    "SELECT json FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq",
                    (s.started["seq"], s.ended["seq"]),
                )
            ]
            return (keys if isinstance(keys, list) else []), lines

        return self.read(q)

    def shoe_report(self, shoe: str) -> dict[str, Any]:
        """Everything the shoe report prints, for an ended shoe."""

        def q(db: sqlite3.Connection) -> dict[str, Any]:
            s = self._shoe(db, shoe)
            if s.ended is None:
                raise NotEnded(f"shoe {shoe} has not ended: a shoe report is made once the shoe ends")
            events = _events(
                db,
                "seq BETWEEN ? AND ? AND type NOT IN ('roads', 'odds.update')",
                (s.lo, s.hi),
            )
            device = db.execute(
                "SELECT json FROM events WHERE type = 'device.status' AND seq < ? ORDER BY seq DESC LIMIT 1",
                (s.lo,),
            ).fetchone()
            errors = [
                e
                for e in events
                if e["type"] in ("misdeal", "coup.void")
                or (e["type"] == "security.alert" and e.get("code") in DEALING_ERRORS)
            ]
            return _report(
                self.path,
                s,
                events,
                json.loads(device[0]) if device else None,
                _error_rows(db, errors, None),
                _shoe_commands(db, s, None),
            )

        return self.read(q)

    def table(self) -> str | None:
        """The table this journal belongs to (from its latest event)."""

        def q(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                "SELECT json_extract(json, '$.table') FROM events ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            return None if row is None or row[0] is None else str(row[0])

        return self.read(q)


# --- queries over one shoe ------------------------------------------------------


def _shoe_commands(db: sqlite3.Connection, s: _Shoe, coup: int | None) -> list[dict[str, Any]]:
    """The supervisor commands (and the daemon's refusals) journalled
    while this shoe was in play; those naming ``coup`` only, unless None.
    Each with ``reply`` read from the events made at its time."""
    start, end = s.span
    rows = db.execute(
        "SELECT id, t, data FROM inputs WHERE kind = 'cmd' AND t >= ? AND t < ? ORDER BY id",
        (start, end if end != float("inf") else 1e18),
    ).fetchall()
    out: list[dict[str, Any]] = []
    for input_id, t, data in rows:
        try:
            # read by the daemon's own parser: a card as the engine took
            # it ("td" sent, "TD" entered), whichever form was journalled
            cmd = command_dict(parse_journalled(bytes(data)))
        except CommandError:
            try:
                cmd = json.loads(bytes(data))
            except (ValueError, UnicodeDecodeError):
                continue
        if not isinstance(cmd, dict):
            continue
        name = str(cmd.get("cmd"))
        if name in ("_alert", "_refused"):
            continue  # the daemon's own notes: their alerts are events
        if coup is not None and cmd.get("coup") != coup:
            continue
        out.append(
            {
                "input": int(input_id),
                "t": float(t),
                "ts": format_ts(float(t)),
                "id": cmd.get("id"),
                "cmd": name.lstrip("_") if name == "_reject" else name,
                "coup": cmd.get("coup"),
                "args": {k: v for k, v in cmd.items() if k in ("card", "cards", "reason", "confirm")},
                "refused": name == "_reject",
                "error": cmd.get("error") if name == "_reject" else None,
            }
        )
    if out:
        at = {c["ts"] for c in out}
        made = _events(
            db,
            "seq BETWEEN ? AND ? AND ts IN (" + ",".join("?" * len(at)) + ")",
            (s.lo, s.hi, *sorted(at)),
        )
        for c in out:
            c["reply"] = _reply(c, [e for e in made if e["ts"] == c["ts"]])
    return out


# --- helpers (pure) ------------------------------------------------------------


def _shm_missing(path: Path, exc: sqlite3.Error) -> bool:
    """A WAL journal whose ``-shm`` is gone (copied without it, deleted),
    opened ``mode=ro`` where the reader cannot create the ``-shm``."""
    return (
        "unable to open" in str(exc).lower()
        and Path(f"{path}-wal").exists()
        and not Path(f"{path}-shm").exists()
    )


def _explain(exc: sqlite3.Error) -> str:
    text = str(exc)
    low = text.lower()
    if "not a database" in low or "malformed" in low or "file is encrypted" in low:
        return f"not a shoe-controller journal, or a damaged one ({text})"
    if "unable to open" in low:
        return f"cannot open it read-only ({text}; check the file's and its directory's permissions)"
    if "locked" in low or "busy" in low:
        return f"the journal stayed locked ({text}); try again"
    return text


def _events(
    db: sqlite3.Connection, where: str, args: Iterable[Any], *, limit: int | None = None
) -> list[dict[str, Any]]:
    sql = f"SELECT json FROM events WHERE {where} ORDER BY seq"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    out = []
    for (text,) in db.execute(sql, tuple(args)):
        try:
            ev = json.loads(text)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def _in_range(ts: str, lo: str | None, hi: str | None) -> bool:
    return (lo is None or ts >= lo) and (hi is None or ts < hi)


def _group_coups(events: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    coups: dict[tuple[str, int], dict[str, Any]] = {}
    for ev in events:
        n = ev.get("coup")
        if not isinstance(n, int):
            continue
        key = (str(ev.get("shoe")), n)
        fresh = key not in coups
        c = coups.setdefault(
            key,
            {
                "shoe": key[0],
                "coup": n,
                "order": ev["seq"],
                "first_ts": ev["ts"],
                "misdeals": [],
                "result": None,
            },
        )
        kind = ev["type"]
        # the latest time seen of the coup's events, in journal order: a
        # result released by a supervisor's entry keeps its RESULT's read
        # time, earlier than the entry; the coup closed at the entry
        seen = ev["ts"] if fresh else max(c["latest_ts"], ev["ts"])
        if "closed_ts" not in c:
            c["latest_ts"] = seen
        if kind == "misdeal":
            if ev["code"] not in c["misdeals"]:
                c["misdeals"].append(ev["code"])
        elif kind == "coup.result":
            c["result"], c["closed_ts"] = ev, seen
        elif kind == "coup.void":
            c["void"], c["closed_ts"] = ev, seen
        elif kind == "coup.corrected":
            # the result in force (a coup corrected twice: the latest), and
            # what the first result was
            c.setdefault("superseded", c.get("result"))
            c["result"] = ev
    return coups


def _cards(hand: Mapping[str, Any] | None) -> list[str]:
    return [str(x) if x else "??" for x in (hand or {}).get("cards", [])]


def _coup_row(c: Mapping[str, Any]) -> dict[str, Any]:
    r = c.get("result")
    v = c.get("void")
    status = "void" if v else ("demo" if r and r.get("demo") else ("settled" if r else "open"))
    pairs = []
    if r and r.get("player_pair"):
        pairs.append("player")
    if r and r.get("banker_pair"):
        pairs.append("banker")
    return {
        "shoe": c["shoe"],
        "coup": c["coup"],
        "ts": c.get("closed_ts") or c["first_ts"],
        "status": status,
        "winner": r["winner"] if r and not v else None,
        "player": _cards(r["player"]) if r else [],
        "player_total": r["player"]["total"] if r else None,
        "banker": _cards(r["banker"]) if r else [],
        "banker_total": r["banker"]["total"] if r else None,
        "natural": bool(r.get("natural")) if r else None,
        "pairs": pairs,
        "tags": list(r.get("tags") or []) if r else [],
        "misdeals": list(c["misdeals"]),
        "void_code": v["code"] if v else None,
        "corrected": _corrected_text(r, c.get("superseded"))
        if r and r.get("type") == "coup.corrected"
        else None,
    }


def _corrected_text(r: Mapping[str, Any], first: Mapping[str, Any] | None) -> str:
    """``P1 6S->8D (was BANKER)``: what a coup's correction in force changed."""
    changes = ", ".join(
        f"{c.get('position')} {c.get('was')}->{c.get('card')}" for c in r.get("changes") or []
    )
    was = f" (was {str(first.get('winner')).upper()})" if first is not None else ""
    return changes + was


_SETTLE_ORDER = ("player", "banker", "tie", "player_pair", "banker_pair", "dragon7", "panda8", "b27")


def _signed(x: Any) -> str:
    return f"{x:+g}" if isinstance(x, (int, float)) else str(x)


def describe(ev: Mapping[str, Any]) -> str:
    """One line saying what an event of a coup means, for people."""
    kind = ev.get("type")
    if kind == "card":
        flags = [
            f
            for f, on in (("face up", ev.get("face_up")), ("entered by supervisor", ev.get("entered")))
            if on
        ]
        card = ev.get("card") or "unread"
        return f"{ev.get('position')} {card}" + (f" ({', '.join(flags)})" if flags else "")
    if kind == "misdeal":
        text = f"{ev.get('code')} {ev.get('action')}: {ev.get('detail')}"
        return text + (f" (deadline {ev['deadline']})" if ev.get("deadline") else "")
    if kind == "coup.result":
        p, b = ev.get("player") or {}, ev.get("banker") or {}
        extras = [
            w
            for w, on in (
                ("natural", ev.get("natural")),
                ("player pair", ev.get("player_pair")),
                ("banker pair", ev.get("banker_pair")),
                ("demo, not settled", ev.get("demo")),
            )
            if on
        ] + list(ev.get("tags") or [])
        settle = ev.get("settlement") or {}
        money = ", ".join(f"{k} {_signed(settle[k])}" for k in _SETTLE_ORDER if k in settle)
        return (
            f"{str(ev.get('winner')).upper()} wins: Player {p.get('total')} ({' '.join(_cards(p))})"
            f" v Banker {b.get('total')} ({' '.join(_cards(b))})"
            + (f"; {', '.join(extras)}" if extras else "")
            + (f"; settlement {money}" if money else "")
            + (f"; corrected {', '.join(ev['corrections'])}" if ev.get("corrections") else "")
        )
    if kind == "coup.corrected":
        p, b = ev.get("player") or {}, ev.get("banker") or {}
        changes = ", ".join(
            f"{c.get('position')} {c.get('was')}->{c.get('card')}" for c in ev.get("changes") or []
        )
        settle = ev.get("settlement") or {}
        money = ", ".join(f"{k} {_signed(settle[k])}" for k in _SETTLE_ORDER if k in settle)
        return (
            f"CORRECTED by supervisor ({changes}): {str(ev.get('winner')).upper()} wins:"
            f" Player {p.get('total')} ({' '.join(_cards(p))})"
            f" v Banker {b.get('total')} ({' '.join(_cards(b))})"
            + (f"; settlement {money}" if money else "")
            + f"; supersedes {ev.get('supersedes')}; reason: {ev.get('reason')}"
        )
    if kind == "coup.void":
        cards = " ".join(f"{c.get('position')}={c.get('card') or '??'}" for c in ev.get("cards") or [])
        return f"VOID (Article {ev.get('article', 'X')}) {ev.get('code')}: {ev.get('detail', '')}" + (
            f"; cards as dealt {cards}" if cards else ""
        )
    if kind == "security.alert":
        return f"ALERT {ev.get('code')}: {ev.get('detail')}"
    if kind == "device.status":
        return f"device {ev.get('state')} ({ev.get('code')})"
    if kind == "shoe.cut_card":
        return f"cut card: the last coup is {ev.get('last_coup')}"
    return str(kind)


def _reply(cmd: Mapping[str, Any], made: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A command's outcome, read from the events made at its time."""
    if cmd["refused"]:
        return {"ok": False, "error": cmd["error"], "recorded": False, "effects": []}
    name, coup = cmd["cmd"], cmd.get("coup")
    mine = [e for e in made if e.get("coup") in (coup, None) or e["type"].startswith("shoe.")]

    def has(pred: Callable[[Mapping[str, Any]], bool]) -> list[Mapping[str, Any]]:
        return [e for e in mine if pred(e)]

    if name == "void":
        effects = has(lambda e: e["type"] == "coup.void" and e.get("code") == "SUPERVISOR_VOID")
    elif name == "enter_card":
        card = str(cmd["args"].get("card") or "").upper()
        effects = has(
            lambda e: (
                (e["type"] == "card" and bool(e.get("entered")) and e.get("card") == card)
                or (
                    e["type"] == "misdeal"
                    and e.get("action") == "corrected"
                    and "supervisor" in str(e.get("detail"))
                )
            )
        )
    elif name == "accept":
        effects = has(
            lambda e: (
                (e["type"] == "misdeal" and e.get("action") == "corrected")
                or (e["type"] == "security.alert" and e.get("code") == "COUP_NUMBERING_RESTORED")
            )
        )
    elif name == "new_shoe":
        effects = has(lambda e: e["type"] == "shoe.started")
    elif name == "end_shoe":
        effects = has(lambda e: e["type"] == "shoe.ended")
    elif name == "correct":
        effects = has(lambda e: e["type"] == "coup.corrected" and e.get("command_id") == cmd.get("id"))
    else:
        effects = []
    return {
        "ok": True if effects else None,
        "error": None,
        "recorded": False,
        "effects": [e["seq"] for e in effects],
    }


def command_text(c: Mapping[str, Any]) -> str:
    """One line for a supervisor command and what came of it."""
    args = " ".join(f"{k}={v!s}" for k, v in c["args"].items() if v not in ("", None))
    head = f"{c['cmd']} id={c['id']!s}" + (f" coup={c['coup']}" if c.get("coup") is not None else "")
    head += f" {args}" if args else ""
    reply = c.get("reply") or {}
    if reply.get("ok") is False:
        return f"{head}: REFUSED by the daemon: {reply.get('error')}"
    if reply.get("ok"):
        return f"{head}: applied (events {', '.join(str(s) for s in reply['effects'])})"
    return f"{head}: no effect in the journal (refused by the engine, or a card of a gap still short)"


def _closed_at(own: Sequence[Mapping[str, Any]], closing: Mapping[str, Any] | None) -> str | None:
    """When a coup was closed: its result's (or void's) time, or later, the
    latest time of its events journalled before it. A result released by a
    supervisor's entry keeps its RESULT's read time, which precedes the
    entry (docs: Dealing errors): the coup closed at the entry, not before."""
    if closing is None:
        return None
    return max(str(e["ts"]) for e in own if e["seq"] <= closing["seq"])


def _timeline(
    s: _Shoe,
    coup: int,
    own: list[dict[str, Any]],
    device: list[dict[str, Any]],
    commands: list[dict[str, Any]],
) -> dict[str, Any]:
    result = next((e for e in own if e["type"] == "coup.result"), None)
    void = next((e for e in own if e["type"] == "coup.void"), None)
    # Events in the engine's order (seq; a result's ts is its RESULT's read
    # time, which can precede a card entered later by the supervisor), each
    # command placed before the first event at or after its time.
    pending = sorted(commands, key=lambda c: (c["t"], c["input"]))
    entries: list[dict[str, Any]] = []

    def flush(until: str | None) -> None:
        while pending and (until is None or pending[0]["ts"] <= until):
            c = pending.pop(0)
            entries.append(
                {
                    "ts": c["ts"],
                    "seq": None,
                    "input": c["input"],
                    "kind": "command",
                    "position": None,
                    "card": c["args"].get("card"),
                    "code": None,
                    "detail": command_text(c),
                    "command": c,
                }
            )

    for ev in sorted([*own, *device], key=lambda e: e["seq"]):
        flush(ev["ts"])
        entries.append(
            {
                "ts": ev["ts"],
                "seq": ev["seq"],
                "input": None,
                "kind": {
                    "coup.result": "result",
                    "coup.void": "void",
                    "coup.corrected": "corrected",
                    "security.alert": "alert",
                }.get(ev["type"], ev["type"]),
                "position": ev.get("position") if ev["type"] == "card" else None,
                "card": (ev.get("card") or "unread") if ev["type"] == "card" else None,
                "code": ev.get("code") if ev["type"] in ("misdeal", "coup.void", "security.alert") else None,
                "detail": describe(ev),
                "event": ev,
            }
        )
    flush(None)
    status = (
        "void" if void else ("demo" if result and result.get("demo") else ("settled" if result else "open"))
    )
    misdeals = [e for e in own if e["type"] == "misdeal"]
    corrections = [e for e in own if e["type"] == "coup.corrected"]
    return {
        "table": own[0].get("table"),
        "shoe": s.id,
        "coup": coup,
        "status": status,
        "first_ts": own[0]["ts"],
        "closed_ts": _closed_at(own, void or result),
        "cards": [
            {k: e.get(k) for k in ("ts", "seq", "position", "card", "value", "face_up", "entered")}
            for e in own
            if e["type"] == "card"
        ],
        "misdeals": misdeals,
        "commands": commands,
        "result": result,
        #: supervisors' corrections of the result, in order: the last is in force
        "corrections": corrections,
        "void": void,
        "entries": entries,
        "columns": ENTRY_COLUMNS,
    }


def _resolution(chain: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(first action, how it ended) of one code's misdeal events in a coup."""
    first = str(chain[0].get("action")) if chain else ""
    last = chain[-1] if chain else {}
    action = last.get("action")
    if action == "corrected":
        detail = str(last.get("detail") or "")
        by = "by supervisor" if "supervisor" in detail else "automatically"
        return first, f"corrected {by}: {detail}"
    if action == "void":
        return first, f"void: {last.get('detail')}"
    if action == "awaiting_supervisor":
        return first, f"awaiting supervisor (deadline {last.get('deadline')})"
    return first, str(action or "")


def _error_rows(
    db: sqlite3.Connection, found: list[dict[str, Any]], code: str | None
) -> list[dict[str, Any]]:
    """One row per (shoe, coup, code) found (per alert when it has no coup),
    with the coup's outcome."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for ev in found:
        c = ev.get("code")
        if code is not None and c != code:
            continue
        n = ev.get("coup")
        key = (ev.get("shoe"), n, c) if isinstance(n, int) else (ev.get("shoe"), None, c, ev["seq"])
        groups.setdefault(key, []).append(ev)
    # the outcome of every coup concerned, one query per shoe
    outcomes: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    wanted: dict[Any, set[int]] = {}
    for key in groups:
        if key[1] is not None:
            wanted.setdefault(key[0], set()).add(key[1])
    if wanted:
        # one pass over the coups' outcomes (no JSON parsed in Python)
        for shoe, n, kind, winner, vcode, demo in db.execute(
            "SELECT shoe, json_extract(json, '$.coup'), type, json_extract(json, '$.winner'),"
            " json_extract(json, '$.code'), json_extract(json, '$.demo') FROM events"
            " WHERE type IN ('coup.result', 'coup.void') ORDER BY seq"
        ):
            k = (shoe, n)
            if n in wanted.get(shoe, ()) and (kind == "coup.void" or k not in outcomes):
                outcomes[k] = {"type": kind, "winner": winner, "code": vcode, "demo": bool(demo)}
    rows = []
    for key, chain in groups.items():
        misdeals = [e for e in chain if e["type"] == "misdeal"]
        alerts = [e for e in chain if e["type"] == "security.alert"]
        voids = [e for e in chain if e["type"] == "coup.void"]
        if misdeals:
            first, resolution = _resolution(misdeals)
        elif voids:
            first, resolution = "void", f"void: {voids[0].get('detail')}"
        else:
            first, resolution = "alert", "alert only"
        out = outcomes.get((key[0], key[1]))
        if out is not None and out["type"] == "coup.void" and resolution.startswith("awaiting"):
            resolution = f"not corrected: the coup was voided ({out.get('code')})"
        if out is None:
            outcome = "open" if key[1] is not None else ""
        elif out["type"] == "coup.void":
            outcome = f"void ({out.get('code')})"
        else:
            outcome = f"settled: {out.get('winner')}" + (" (demo)" if out.get("demo") else "")
        lead = (misdeals or voids or alerts)[0]
        detail = "; ".join(dict.fromkeys(str(e.get("detail")) for e in [*misdeals, *alerts]))
        rows.append(
            {
                "shoe": key[0],
                "coup": key[1],
                "ts": lead["ts"],
                "code": lead.get("code"),
                "first_action": first,
                "resolution": resolution,
                "outcome": outcome,
                "detail": detail,
                "seq": lead["seq"],
            }
        )
    rows.sort(key=lambda r: r["seq"])
    return rows


def _streaks(winners: Iterable[str]) -> dict[str, int]:
    best = {"banker": 0, "player": 0}
    run, last = 0, None
    for w in winners:
        if w == "tie":
            continue
        run = run + 1 if w == last else 1
        last = w
        best[w] = max(best.get(w, 0), run)
    return best


def _report(
    path: Path,
    s: _Shoe,
    events: list[dict[str, Any]],
    device: dict[str, Any] | None,
    errors: list[dict[str, Any]],
    commands: list[dict[str, Any]],
) -> dict[str, Any]:
    from controller.commands.roads import last_shoe_coups
    from controller.roads import build_roads

    assert s.ended is not None
    _, results = last_shoe_coups(events)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for ev in events:
        by_type.setdefault(ev["type"], []).append(ev)
    # by coup number, as the report's reader counts them (a coup voided at a
    # deadline after a later one was voided comes after it in the journal)
    voids = sorted(by_type.get("coup.void", []), key=lambda v: (v.get("coup") or 0, v["seq"]))
    misdeals = by_type.get("misdeal", [])
    for v in voids:
        v["misdeals"] = [m for m in misdeals if m.get("coup") == v.get("coup")]
    burn_cards = [e for e in by_type.get("card", []) if e.get("position") == "burn"]
    demo = [e for e in by_type.get("coup.result", []) if e.get("demo")]
    winners = [str(r["winner"]) for r in results]
    settled = len(results)
    ended = s.ended
    started_ts = s.started["ts"] if s.started else s.first_ts
    duration = max(0.0, ts_to_epoch(ended["ts"]) - ts_to_epoch(started_ts))
    tally = dict(ended.get("tally") or {})
    stats = dict(ended.get("stats") or {})

    def share(k: str) -> str:
        return f"{100.0 * tally.get(k, 0) / settled:.1f}%" if settled else "-"

    statistics = {
        "coups": ended.get("coups"),
        "coups_exact": ended.get("coups_exact", True),
        "settled": settled,
        "void": len(voids),
        "demo": len(demo),
        "cards_dealt": ended.get("cards_dealt"),
        "banker_share": share("banker"),
        "player_share": share("player"),
        "tie_share": share("tie"),
        "naturals": stats.get("naturals"),
        "player_pairs": stats.get("player_pairs"),
        "banker_pairs": stats.get("banker_pairs"),
        "tags": stats.get("tags") or {},
        "misdeals": stats.get("misdeals") or {},
        "longest_banker_run": _streaks(winners)["banker"],
        "longest_player_run": _streaks(winners)["player"],
        "duration_s": round(duration, 3),
        "ended_reason": ended.get("reason"),
        "corrected_coups": sum(1 for r in results if r.get("corrections")),
    }
    return {
        "journal": str(path),
        "table": (s.started or ended).get("table"),
        "shoe": s.id,
        "started": s.started,
        "ended": ended,
        "device": (device or {}).get("device"),
        "burn": next(iter(by_type.get("shoe.burn", [])), None),
        "burn_cards": burn_cards,
        "cut_card": next(iter(by_type.get("shoe.cut_card", [])), None),
        "shuffle_commit": (s.started or {}).get("shuffle_commit"),
        "tally": tally,
        "statistics": statistics,
        "roads": build_roads(results),
        "results": results,
        "voids": voids,
        "errors": errors,
        "alerts": by_type.get("security.alert", []),
        "commands": commands,
    }


def iter_rows(page: Page) -> Iterator[dict[str, Any]]:
    for row in page.rows:
        yield {k: row.get(k) for k in page.columns}
