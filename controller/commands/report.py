"""``shoe-controller report``: floor reports over the PostgreSQL archive.

Per table and per period (a shift, or a gaming day: one boundary a day),
for a range of local dates, one table or all:

* coups: settled (non-demo), demo, void, and the void rate
  (void / (settled + demo + void));
* pace: coups per hour *of dealing*: the gaps between a table's successive
  coups (results and voids) of at most ``--idle-minutes`` (default 5) are
  dealing time; longer ones (a shuffle, a break, a closed table) are not.
  ``pace = gaps counted / their total``;
* results against the profile's exact full-shoe probabilities
  (:mod:`controller.floor_stats`): observed and expected Banker/Player/Tie
  with Pearson's chi-square (2 df) and its p; each side bet's hits with a
  chi-square (1 df); a test is *flagged* when ``p < --alpha`` (default
  0.001) and every expected count is at least 5;
* dealing errors by code (one error = one code on one coup, however many
  ``misdeal`` events it took), with how many ended void;
* supervisor interventions (the archive's ``supervisor_interventions``
  view: misdeals corrected or voided by a command, the numbering restored)
  by code;
* theoretical and observed hold per unit staked on every bet (a unit on
  every settled coup: the archive knows no wagers);
* with ``--gaps``, the events the table journalled that the archive lacks:
  holes in the table's ``seq`` among its archived events (counted in the
  period of the archived event before the hole).

Replayed shoes (``replay --out mqtt``) are archived apart, in the schema
``replays`` (migration 5), and never counted here; ``--replays`` reports
them instead of the live ones, alone: the same queries, run with the
search path set to that schema only (every table they read has its twin
there), so a report is all live or all replayed, never a mix.

Bounds: a date range of at most MAX_DAYS days, 1..MAX_SHIFTS shift
boundaries, ``--table`` a table id as the config allows, ``--alpha`` in
(0, 0.5]. Every expected error (bad date or shift, unknown timezone or
table, database unreachable or without the archive schema) is one line and
exit 2 (usage) or 1 (runtime).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.util
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.errors import ExpectedError, RuntimeFailure, UsageError
from controller.floor_stats import DEFAULT_ALPHA, Evaluation, GroupCounts, evaluate, theory
from controller.textsafe import csv_cell, visible_lines

#: The longest date range one report covers (a leap year).
MAX_DAYS = 366
MAX_SHIFTS = 12
DEFAULT_IDLE_MINUTES = 5.0
_TABLE_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
#: The archive schema version this report reads (migration 0001).
SCHEMA_VERSION = 1
#: The migration that keeps replayed events apart (schema ``replays``).
REPLAYS_VERSION = 5


# --- what is asked ----------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    start: dt.date  # first local date (inclusive)
    end: dt.date  # last local date (inclusive)
    tz: ZoneInfo
    shifts: tuple[dt.time, ...]  # period boundaries, sorted; one = a day starting there
    table: str | None
    alpha: float = DEFAULT_ALPHA
    idle_s: float = DEFAULT_IDLE_MINUTES * 60
    gaps: bool = False
    #: the replayed shoes (schema ``replays``) instead of the live ones
    replays: bool = False

    @property
    def by_day(self) -> bool:
        return len(self.shifts) == 1

    def bounds(self) -> tuple[dt.datetime, dt.datetime]:
        """[low, high) in UTC: from the first boundary of ``start`` to the
        first boundary of the day after ``end``, local time."""
        b = self.shifts[0]
        low = dt.datetime.combine(self.start, b, tzinfo=self.tz)
        high = dt.datetime.combine(self.end + dt.timedelta(days=1), b, tzinfo=self.tz)
        return low.astimezone(dt.UTC), high.astimezone(dt.UTC)

    def period_end(self, start: dt.datetime) -> dt.datetime:
        """The local start of the period after the one starting at ``start``."""
        later = [b for b in self.shifts if b > start.time()]
        if later:
            return dt.datetime.combine(start.date(), later[0])
        return dt.datetime.combine(start.date() + dt.timedelta(days=1), self.shifts[0])


def _date(text: str, opt: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{opt}: {text!r} is not a date (YYYY-MM-DD)") from None


def parse_shifts(text: str) -> tuple[dt.time, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_SHIFTS:
        raise UsageError(f"--shifts: give 1 to {MAX_SHIFTS} boundaries HH:MM, comma-separated")
    out = []
    for p in parts:
        m = _HHMM.match(p)
        if m is None:
            raise UsageError(f"--shifts: {p!r} is not a time of day HH:MM (00:00..23:59)")
        out.append(dt.time(int(m.group(1)), int(m.group(2))))
    if len(set(out)) != len(out):
        raise UsageError("--shifts: a boundary is given twice")
    return tuple(sorted(out))


def query_from_args(args: argparse.Namespace, today: dt.date | None = None) -> Query:
    try:
        tz = ZoneInfo(args.tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--tz: unknown time zone {args.tz!r} (an IANA name such as Asia/Macau)") from None
    today = today or dt.datetime.now(tz).date()
    end = _date(args.to, "--to") if args.to else (_date(args.since, "--from") if args.since else today)
    start = _date(args.since, "--from") if args.since else end
    if start > end:
        raise UsageError(f"--from {start} is after --to {end}")
    days = (end - start).days + 1
    if days > MAX_DAYS:
        raise UsageError(f"the date range is {days} days: at most {MAX_DAYS} in one report")
    if args.table is not None and not _TABLE_RE.match(args.table):
        raise UsageError(f"--table: {args.table!r} is not a table id ([A-Za-z0-9_-]{{1,32}})")
    if not 0 < args.alpha <= 0.5:
        raise UsageError(f"--alpha must be in (0, 0.5], not {args.alpha}")
    if not 0 < args.idle_minutes <= 24 * 60:
        raise UsageError(f"--idle-minutes must be in (0, 1440], not {args.idle_minutes}")
    return Query(
        start=start,
        end=end,
        tz=tz,
        shifts=parse_shifts(args.shifts),
        table=args.table,
        alpha=args.alpha,
        idle_s=args.idle_minutes * 60,
        gaps=bool(getattr(args, "gaps", False)),
        replays=bool(getattr(args, "replays", False)),
    )


# --- what the archive says (aggregates per table and period) --------------------------


@dataclass
class Period:
    table: str
    start: dt.datetime  # local, naive
    groups: dict[tuple[str, int], GroupCounts] = field(default_factory=dict)
    demo: int = 0
    void: int = 0
    unknown_shoe: int = 0  # settled coups whose shoe.started is not archived
    paced: int = 0
    dealing_s: float = 0.0
    errors: dict[str, list[int]] = field(default_factory=dict)  # code -> [errors, void]
    interventions: dict[str, int] = field(default_factory=dict)
    #: supervisors' corrections of settled coups made in the period
    #: (``coup.corrected``), listed apart: the results above count them
    corrections: list[dict[str, Any]] = field(default_factory=list)
    #: with --gaps: holes in the table's event seq (events not archived)
    missing: int | None = None

    def merge(self, other: Period) -> None:
        for key, g in other.groups.items():
            mine = self.groups.setdefault(key, GroupCounts(g.profile, g.decks))
            mine.coups += g.coups
            for src, dst in (
                (g.winners, mine.winners),
                (g.settled, mine.settled),
                (g.hits, mine.hits),
            ):
                for k, v in src.items():
                    dst[k] = dst.get(k, 0) + v
            for k, x in g.net.items():
                mine.net[k] = mine.net.get(k, 0.0) + x
        self.demo += other.demo
        self.void += other.void
        self.unknown_shoe += other.unknown_shoe
        self.paced += other.paced
        self.dealing_s += other.dealing_s
        for code, (n, v) in other.errors.items():
            e = self.errors.setdefault(code, [0, 0])
            e[0] += n
            e[1] += v
        for code, n in other.interventions.items():
            self.interventions[code] = self.interventions.get(code, 0) + n
        self.corrections.extend(other.corrections)
        if other.missing is not None:
            self.missing = (self.missing or 0) + other.missing


def _local(q: Query, column: str) -> str:
    """SQL: the local time (timestamp) of ``column`` (timestamptz). The zone
    is a name zoneinfo knows (letters, digits, / _ + -), so a literal."""
    return f"({column} AT TIME ZONE '{q.tz.key}')"


def _period_sql(q: Query, local: str) -> str:
    """The local start of a row's period, as SQL over ``local`` (a local
    timestamp): the latest boundary at or before its time of day, or the
    previous day's last boundary. Boundaries are validated HH:MM, so
    literals."""
    arms = [
        f"WHEN {local}::time >= time '{b.strftime('%H:%M')}' "
        f"THEN date_trunc('day', {local}) + interval '{b.hour} hours {b.minute} minutes'"
        for b in reversed(q.shifts)
    ]
    last = q.shifts[-1]
    other = (
        f"date_trunc('day', {local}) - interval '1 day' + interval '{last.hour} hours {last.minute} minutes'"
    )
    return f"(CASE {' '.join(arms)} ELSE {other} END)"


def _bets_in_play(conn: Any, q: Query, low: dt.datetime, high: dt.datetime) -> list[str]:
    """Every bet name of the profiles of the shoes in the range (their
    settlements' keys), in the profiles' order."""
    rows = conn.execute(
        "SELECT DISTINCT s.profile, s.decks FROM shoes s WHERE s.profile IS NOT NULL "
        "AND (%(t)s::text IS NULL OR s.table_id = %(t)s) "
        "AND coalesce(s.started_at, s.ended_at) < %(hi)s AND coalesce(s.ended_at, 'infinity') >= %(lo)s",
        {"t": q.table, "lo": low, "hi": high},
    ).fetchall()
    names: list[str] = []
    for profile, decks in sorted(rows, key=lambda r: (str(r[0]), int(r[1] or 0))):
        try:
            th = theory(str(profile), int(decks or 8))
        except (ValueError, ExpectedError):  # an unknown profile: evaluate reports it
            continue
        names.extend(b for b in th.bets if b not in names)
    return names


#: The archive's coups with each settled coup's result in force: its latest
#: ``coup.corrected`` (``coup_corrections``) if a supervisor corrected it,
#: else its ``coup.result``. A corrected coup counts once, in the period it
#: was dealt, with the corrected winner and settlement.
IN_FORCE = (
    "(SELECT c.event_id, c.ts, c.table_id, c.shoe, c.seq, c.coup, c.demo, c.void,"
    " coalesce(k.winner, c.winner) AS winner, coalesce(k.settlement, c.settlement) AS settlement"
    " FROM coups c LEFT JOIN LATERAL (SELECT k.winner, k.settlement FROM coup_corrections k"
    "  WHERE k.table_id = c.table_id AND k.shoe IS NOT DISTINCT FROM c.shoe AND k.coup = c.coup"
    "  AND NOT c.void AND NOT c.demo ORDER BY k.seq DESC LIMIT 1) k ON true)"
)


def fetch(conn: Any, q: Query) -> dict[tuple[str, dt.datetime], Period]:
    """Run the report's queries; one Period per (table, period start)."""
    f = _Fetch(conn, q)
    f.coups()
    f.pace()
    f.errors()
    f.interventions()
    f.corrections()
    if q.gaps:
        f.gaps()
    return f.periods


class _Fetch:
    """The report's queries over one time range, each adding its counts to
    the Period of their (table, period start)."""

    def __init__(self, conn: Any, q: Query) -> None:
        low, high = self.low, self.high = q.bounds()
        self.conn = conn
        self.q = q
        self.params: dict[str, Any] = {"t": q.table, "lo": low, "hi": high, "idle": q.idle_s}
        self.where = "c.ts >= %(lo)s AND c.ts < %(hi)s AND (%(t)s::text IS NULL OR c.table_id = %(t)s)"
        self.periods: dict[tuple[str, dt.datetime], Period] = {}

    def period(self, table: str, start: dt.datetime) -> Period:
        key = (table, start)
        p = self.periods.get(key)
        if p is None:
            p = self.periods[key] = Period(table, start)
        return p

    def coups(self) -> None:
        """Coups settled, demo and void; per shoe profile and decks, the
        winners and each bet's hits and net."""
        q = self.q
        bets = _bets_in_play(self.conn, q, self.low, self.high)
        bet_vals = []
        bet_aggs = []
        for i, bet in enumerate(bets):
            # NULL for a demo or void coup (no settlement) and a bet not offered
            bet_vals.append(f", (c.settlement->>%(b{i})s)::float8 AS b{i}")
            bet_aggs.append(f", count(b{i}), count(*) FILTER (WHERE b{i} > 0), coalesce(sum(b{i}), 0)")
            self.params[f"b{i}"] = bet
        rows = self.conn.execute(
            f"SELECT table_id, {_period_sql(q, 'l')} AS period, profile, decks,"
            " count(*) FILTER (WHERE NOT void AND NOT demo),"
            " count(*) FILTER (WHERE NOT void AND demo),"
            " count(*) FILTER (WHERE void),"
            " count(*) FILTER (WHERE NOT void AND NOT demo AND winner = 'banker'),"
            " count(*) FILTER (WHERE NOT void AND NOT demo AND winner = 'player'),"
            " count(*) FILTER (WHERE NOT void AND NOT demo AND winner = 'tie')"
            f" {''.join(bet_aggs)}"
            f" FROM (SELECT c.table_id, {_local(q, 'c.ts')} AS l,"
            " s.profile, s.decks, c.void, c.demo, c.winner"
            f" {''.join(bet_vals)}"
            f" FROM {IN_FORCE} c LEFT JOIN shoes s ON s.table_id = c.table_id AND s.shoe = c.shoe"
            f" WHERE {self.where}) x GROUP BY 1, 2, 3, 4",
            self.params,
        ).fetchall()
        for r in rows:
            p = self.period(r[0], r[1])
            settled, demo, void, banker, player, tie = (int(x) for x in r[4:10])
            p.demo += demo
            p.void += void
            if r[2] is None:
                p.unknown_shoe += settled
                continue
            g = p.groups.setdefault((str(r[2]), int(r[3])), GroupCounts(str(r[2]), int(r[3])))
            g.coups += settled
            for k, n in (("banker", banker), ("player", player), ("tie", tie)):
                g.winners[k] = g.winners.get(k, 0) + n
            for i, bet in enumerate(bets):
                n, hits, net = r[10 + 3 * i : 13 + 3 * i]
                if n:
                    g.settled[bet] = g.settled.get(bet, 0) + int(n)
                    g.hits[bet] = g.hits.get(bet, 0) + int(hits)
                    g.net[bet] = g.net.get(bet, 0.0) + float(net)

    def pace(self) -> None:
        """Dealing time: the gaps of at most ``idle`` seconds between a
        table's successive coups."""
        q = self.q
        rows = self.conn.execute(
            f"SELECT table_id, {_period_sql(q, 'l')}, count(*), coalesce(sum(gap), 0) FROM ("
            f"  SELECT c.table_id, {_local(q, 'c.ts')} AS l, extract(epoch FROM c.ts - lag(c.ts) OVER"
            "    (PARTITION BY c.table_id ORDER BY c.ts)) AS gap"
            f"  FROM coups c WHERE {self.where}) x WHERE gap <= %(idle)s GROUP BY 1, 2",
            self.params,
        ).fetchall()
        for table, start, n, secs in rows:
            p = self.period(table, start)
            p.paced += int(n)
            p.dealing_s += float(secs)

    def errors(self) -> None:
        """Dealing errors: one per (shoe, coup, code), in the period of its
        first event, and how many were voided."""
        q = self.q
        rows = self.conn.execute(
            f"SELECT table_id, {_period_sql(q, _local(q, 'first'))}, code, count(*),"
            " count(*) FILTER (WHERE voided) FROM ("
            "  SELECT c.table_id, c.shoe, c.coup, c.code, min(c.ts) AS first,"
            "         bool_or(c.action = 'void') AS voided"
            f"  FROM misdeals c WHERE {self.where} GROUP BY 1, 2, 3, 4) e GROUP BY 1, 2, 3",
            self.params,
        ).fetchall()
        for table, start, code, n, voided in rows:
            self.period(table, start).errors[str(code)] = [int(n), int(voided)]

    def interventions(self) -> None:
        """Supervisor interventions by code."""
        q = self.q
        rows = self.conn.execute(
            f"SELECT table_id, {_period_sql(q, _local(q, 'c.ts'))}, code, count(*)"
            f" FROM supervisor_interventions c WHERE {self.where} GROUP BY 1, 2, 3",
            self.params,
        ).fetchall()
        for table, start, code, n in rows:
            self.period(table, start).interventions[str(code)] = int(n)

    def corrections(self) -> None:
        """Corrections, in the period they were made, with the result they supersede."""
        q = self.q
        rows = self.conn.execute(
            f"SELECT table_id, {_period_sql(q, _local(q, 'c.ts'))}, c.shoe, c.coup, c.ts, c.changes,"
            " coalesce((SELECT r.winner FROM coups r WHERE r.event_id = c.supersedes LIMIT 1),"
            "          (SELECT r.winner FROM coup_corrections r WHERE r.event_id = c.supersedes LIMIT 1)),"
            " c.winner, c.reason, c.command_id, c.event_id, c.supersedes"
            f" FROM coup_corrections c WHERE {self.where} ORDER BY c.table_id, c.seq",
            self.params,
        ).fetchall()
        for table, start, shoe, coup, ts, changes, was, winner, *ids in rows:
            reason, command_id, event_id, supersedes = ids
            self.period(table, start).corrections.append(
                {
                    "shoe": shoe,
                    "coup": int(coup),
                    "at": ts.astimezone(q.tz).replace(tzinfo=None).isoformat(timespec="seconds"),
                    "changes": changes,
                    "was": was,
                    "winner": winner,
                    "reason": reason,
                    "command_id": command_id,
                    "event_id": event_id,
                    "supersedes": supersedes,
                }
            )

    def gaps(self) -> None:
        """Events the archive is missing: holes in each table's seq."""
        q = self.q
        for p in self.periods.values():
            p.missing = 0
        # a hole between two archived events of a table counts in the
        # period of the event before it
        rows = self.conn.execute(
            f"SELECT table_id, {_period_sql(q, 'l')}, coalesce(sum(next - seq - 1), 0) FROM ("
            f"  SELECT c.table_id, c.seq, {_local(q, 'c.ts')} AS l,"
            "    lead(c.seq) OVER (PARTITION BY c.table_id ORDER BY c.seq) AS next"
            f"  FROM events c WHERE {self.where}) x WHERE next > seq + 1 GROUP BY 1, 2",
            self.params,
        ).fetchall()
        for table, start, n in rows:
            self.period(table, start).missing = int(n)


def check_table(conn: Any, table: str) -> None:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM shoes WHERE table_id = %(t)s)"
        " OR EXISTS (SELECT 1 FROM coups WHERE table_id = %(t)s)",
        {"t": table},
    ).fetchone()
    if not row or not row[0]:
        known = [r[0] for r in conn.execute("SELECT DISTINCT table_id FROM shoes ORDER BY 1 LIMIT 21")]
        listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "") if known else "none"
        raise UsageError(f"unknown table {table!r}: the archive has nothing of it (tables: {listed})")


# --- the report: figures per (table, period) --------------------------------------------


def _num(x: float | None, digits: int | None = None) -> float | None:
    """A figure for JSON: full precision unless ``digits``; None if not finite."""
    if x is None or not math.isfinite(x):
        return None
    return x if digits is None else round(x, digits)


def figures(q: Query, p: Period, label: str | None = None) -> dict[str, Any]:
    """One row of the report (what ``--json`` prints for a table and period)."""
    ev: Evaluation = evaluate(list(p.groups.values()), q.alpha)
    settled = sum(g.coups for g in p.groups.values()) + p.unknown_shoe
    ended = settled + p.demo + p.void
    start = p.start
    out: dict[str, Any] = {
        "table": p.table,
        "period": label or start.strftime("%Y-%m-%d %H:%M"),
        "start": start.isoformat(timespec="minutes"),
        "end": q.period_end(start).isoformat(timespec="minutes") if label is None else None,
        "profiles": sorted(f"{g.profile}/{g.decks}" for g in p.groups.values() if g.coups),
        "coups": {"settled": settled, "demo": p.demo, "void": p.void, "total": ended},
        "void_rate": _num(p.void / ended) if ended else None,
        "dealing_hours": _num(p.dealing_s / 3600, 4),
        "pace": _num(p.paced / (p.dealing_s / 3600), 2) if p.dealing_s > 0 else None,
        "results": None,
        "side_bets": {},
        "hold": {},
        "errors": {code: {"errors": n, "void": v} for code, (n, v) in sorted(p.errors.items())},
        "interventions": dict(sorted(p.interventions.items())),
        "corrections": list(p.corrections),
        "missing_events": p.missing,
        "untested": {
            **({"no shoe.started archived": p.unknown_shoe} if p.unknown_shoe else {}),
            **ev.unknown,
        },
        "tests": ev.tests,
        "flagged": ev.flagged,
    }
    if ev.main is not None:
        m = ev.main
        out["results"] = {
            "observed": m.observed,
            "expected": {k: _num(v, 3) for k, v in m.expected.items()},
            "chi2": _num(m.statistic, 4),
            "df": m.df,
            "p": m.p,
            "low_expected": m.low_expected,
            "flagged": m.flagged,
        }
    for bet, t in ev.side.items():
        out["side_bets"][bet] = {
            "hits": t.observed["hit"],
            "expected": _num(t.expected["hit"], 3),
            "coups": t.observed["hit"] + t.observed["miss"],
            "chi2": _num(t.statistic, 4),
            "p": t.p,
            "low_expected": t.low_expected,
            "flagged": t.flagged,
        }
    for bet, h in ev.hold.items():
        out["hold"][bet] = {
            "coups": h.coups,
            "theoretical": _num(h.theoretical),
            "observed": _num(h.observed),
            "stderr": _num(h.stderr),
        }
    return out


def build(q: Query, periods: dict[tuple[str, dt.datetime], Period]) -> dict[str, Any]:
    """The whole report: rows per (table, period) in order, and per table
    its totals over the range."""
    rows = [figures(q, periods[k]) for k in sorted(periods)]
    totals: dict[str, Period] = {}
    for (table, _), p in sorted(periods.items()):
        tot = totals.setdefault(table, Period(table, dt.datetime.combine(q.start, q.shifts[0])))
        tot.merge(p)
    total_rows = [figures(q, totals[t], label=f"{q.start}..{q.end}") for t in sorted(totals)]
    tests = sum(r["tests"] for r in rows)
    low, high = q.bounds()
    return {
        "from": q.start.isoformat(),
        "to": q.end.isoformat(),
        "timezone": q.tz.key,
        "shifts": [b.strftime("%H:%M") for b in q.shifts],
        "utc_range": [low.isoformat(), high.isoformat()],
        "table": q.table,
        "replays": q.replays,
        "alpha": q.alpha,
        "idle_minutes": q.idle_s / 60,
        "tests": tests,
        "expected_false_flags": round(tests * q.alpha, 4),
        "flagged": sum(r["flagged"] for r in rows),
        "rows": rows,
        "totals": total_rows,
    }


# --- output -----------------------------------------------------------------------------


def _pct(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    text = f"{100 * x:.{digits}f}"
    if text.startswith("-") and not text.strip("-0."):
        text = text[1:]  # no "-0.00%"
    return text + "%"


def _p(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.2g}" if x < 0.01 else f"{x:.3f}"


def _side_worst(r: dict[str, Any]) -> str:
    if not r["side_bets"]:
        return "-"
    bet, t = min(r["side_bets"].items(), key=lambda kv: kv[1]["p"])
    return f"{bet} {_p(t['p'])}"


def render_text(rep: dict[str, Any]) -> str:
    out = io.StringIO()
    w = out.write
    per = "day" if len(rep["shifts"]) == 1 else "shift"
    what = "Replays report (replayed shoes only, not the floor's)" if rep.get("replays") else "Floor report"
    w(
        f"{what} {rep['from']} .. {rep['to']} ({rep['timezone']}), {per}s from "
        f"{', '.join(rep['shifts'])}; flag at p < {rep['alpha']:g}\n"
    )
    head = ("table", per, "coups", "demo", "void", "void%", "pace/h", "B", "P", "T", "p(BPT)", "worst side p",
            "errors", "interv.", "flag")  # fmt: skip
    lines = [head]
    for r in rep["rows"]:
        res = r["results"] or {}
        obs = res.get("observed", {})
        lines.append(
            (
                r["table"],
                r["period"],
                str(r["coups"]["settled"]),
                str(r["coups"]["demo"]),
                str(r["coups"]["void"]),
                _pct(r["void_rate"], 1),
                "-" if r["pace"] is None else f"{r['pace']:.1f}",
                str(obs.get("banker", "-")),
                str(obs.get("player", "-")),
                str(obs.get("tie", "-")),
                _p(res.get("p")),
                _side_worst(r),
                str(sum(e["errors"] for e in r["errors"].values())),
                str(sum(r["interventions"].values())),
                "FLAG" if r["flagged"] else "",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        w(
            "  ".join(
                c.rjust(widths[i]) if i >= 2 else c.ljust(widths[i]) for i, c in enumerate(line)
            ).rstrip()
        )
        w("\n")
    if not rep["rows"]:
        w("(no coups, errors or interventions archived in this range)\n")
    w(
        f"{rep['tests']} tests at alpha {rep['alpha']:g}: about {rep['expected_false_flags']:g} "
        f"false flag(s) expected if every table is fair; {rep['flagged']} period(s) flagged.\n"
    )
    corrections = [(r["table"], c) for r in rep["rows"] for c in r["corrections"]]
    if corrections:
        # listed apart; the figures above count each corrected coup's result in force
        w(f"\nCorrections of settled coups ({len(corrections)}; counted above as corrected):\n")
        for table, c in corrections:
            w(f"  {table} {_correction(c)}\n")
    for r in [x for x in rep["rows"] if x["flagged"]] + rep["totals"]:
        w("\n")
        _detail(w, r)
    return out.getvalue()


def _correction(c: dict[str, Any]) -> str:
    """One correction of a settled coup, as the text and the CSV list it."""
    changes = ", ".join(f"{x['position']} {x['was']}->{x['card']}" for x in c["changes"])
    return (
        f"{c['at']} shoe {c['shoe']} coup {c['coup']}: {changes}: {c['was'] or '?'} -> "
        f"{c['winner']}; reason: {c['reason']} (command {c['command_id']})"
    )


def _detail(w: Any, r: dict[str, Any]) -> None:
    c = r["coups"]
    w(f"{r['table']} {r['period']}  ({', '.join(r['profiles']) or 'no profile'})")
    w("  FLAGGED\n" if r["flagged"] else "\n")
    pace = "-" if r["pace"] is None else f"{r['pace']:.1f}"
    w(
        f"  coups {c['settled']} settled, {c['demo']} demo, {c['void']} void (void rate "
        f"{_pct(r['void_rate'], 2)}); pace {pace} coups/h over {r['dealing_hours']:.2f} h of dealing\n"
    )
    res = r["results"]
    if res:
        w("  result   observed   expected\n")
        for k in ("banker", "player", "tie"):
            w(f"  {k:<7}{res['observed'][k]:>10}{res['expected'][k]:>11.1f}\n")
        low = " (expected < 5: not flagged)" if res["low_expected"] else ""
        w(f"  chi-square {res['chi2']:.3f}, {res['df']} df, p = {_p(res['p'])}{low}\n")
    if r["side_bets"]:
        w("  side bet       hits   expected   chi2       p\n")
        for bet, t in r["side_bets"].items():
            mark = " FLAG" if t["flagged"] else (" (low)" if t["low_expected"] else "")
            w(f"  {bet:<12}{t['hits']:>7}{t['expected']:>11.1f}{t['chi2']:>7.2f}{_p(t['p']):>8}{mark}\n")
    if r["hold"]:
        w("  hold per unit   theoretical   observed   (± std. error if fair)\n")
        for bet, h in r["hold"].items():
            th, ob, se = _pct(h["theoretical"], 3), _pct(h["observed"], 3), _pct(h["stderr"], 3)
            w(f"  {bet:<14}{th:>13}{ob:>11}   ± {se}\n")
    if r["errors"]:
        parts = [
            f"{k} {v['errors']}" + (f" ({v['void']} void)" if v["void"] else "")
            for k, v in r["errors"].items()
        ]
        w(f"  dealing errors: {', '.join(parts)}\n")
    if r["missing_events"]:
        w(f"  events missing from the archive (holes in the table's seq): {r['missing_events']}\n")
    if r["interventions"]:
        w(f"  supervisor interventions: {', '.join(f'{k} {n}' for k, n in r['interventions'].items())}\n")
    for why, n in r["untested"].items():
        w(f"  not tested: {why}: {n}\n")


def csv_rows(rep: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """One flat row per (table, period); the header is the union of the
    rows' columns (a side bet's columns appear when some profile has it)."""
    flat: list[dict[str, Any]] = []
    for r in rep["rows"]:
        f: dict[str, Any] = {
            "table": r["table"],
            # every row says whose figures it holds: a replays report's rows
            # (``--replays``) are never the floor's, even cut out of the file
            "source": "replay" if rep.get("replays") else "live",
            "start": r["start"],
            "end": r["end"],
            "profiles": " ".join(r["profiles"]),
            "settled": r["coups"]["settled"],
            "demo": r["coups"]["demo"],
            "void": r["coups"]["void"],
            "void_rate": r["void_rate"],
            "dealing_hours": r["dealing_hours"],
            "pace": r["pace"],
        }
        res = r["results"]
        for k in ("banker", "player", "tie"):
            f[f"{k}_observed"] = res["observed"][k] if res else None
            f[f"{k}_expected"] = res["expected"][k] if res else None
        f["bpt_chi2"] = res["chi2"] if res else None
        f["bpt_p"] = res["p"] if res else None
        f["bpt_flag"] = res["flagged"] if res else None
        for bet, t in r["side_bets"].items():
            f[f"{bet}_hits"] = t["hits"]
            f[f"{bet}_expected"] = t["expected"]
            f[f"{bet}_chi2"] = t["chi2"]
            f[f"{bet}_p"] = t["p"]
            f[f"{bet}_flag"] = t["flagged"]
        for bet, h in r["hold"].items():
            f[f"hold_{bet}_theoretical"] = h["theoretical"]
            f[f"hold_{bet}_observed"] = h["observed"]
        f["errors"] = sum(e["errors"] for e in r["errors"].values())
        for code, e in r["errors"].items():
            f[f"error_{code}"] = e["errors"]
        f["interventions"] = sum(r["interventions"].values())
        # the corrections made in the period: how many, and each as the
        # text lists it, in order, separated by " | " (``--json`` has their
        # fields one by one)
        f["corrections"] = len(r["corrections"])
        f["correction_list"] = " | ".join(_correction(c) for c in r["corrections"])
        if r["missing_events"] is not None:
            f["missing_events"] = r["missing_events"]
        f["flagged"] = r["flagged"]
        flat.append(f)
    header: list[str] = []
    for f in flat:
        header.extend(k for k in f if k not in header)
    return header, flat


def render_csv(rep: dict[str, Any]) -> str:
    header, flat = csv_rows(rep)
    out = io.StringIO()
    columns = header or ["table"]
    wr = csv.writer(out, lineterminator="\n")
    # every cell through csv_cell: a table name or an error code from the
    # archive shows no control character and is never run as a formula
    wr.writerow([csv_cell(k) for k in columns])
    for f in flat:
        wr.writerow([csv_cell("" if f.get(k) is None else f[k]) for k in columns])
    return out.getvalue()


# --- the command --------------------------------------------------------------------------


def dsn_from(args: argparse.Namespace) -> str:
    if args.dsn:
        return str(args.dsn)
    if args.config:
        from controller.archive.config import load_archive_config

        return load_archive_config(args.config).dsn
    raise UsageError("give the archive's database: --dsn 'host=... dbname=...' or -c ARCHIVE_CONFIG")


def report(conn: Any, q: Query) -> dict[str, Any]:
    from controller.archive.migrate import applied

    have = applied(conn)
    if SCHEMA_VERSION not in have:
        raise RuntimeFailure(
            "this database has no floor archive schema: run shoe-controller archive --config FILE --migrate"
        )
    if q.replays:
        if REPLAYS_VERSION not in have:
            raise RuntimeFailure(
                "this archive keeps no replays apart yet (migration 5):"
                " run shoe-controller archive --config FILE --migrate"
            )
        # every table and view the queries name is then the replays' twin;
        # pg_catalog stays implicitly first, public is not searched at all
        conn.execute("SET search_path TO replays")
    if q.table is not None:
        check_table(conn, q.table)
    return build(q, fetch(conn, q))


def run(args: argparse.Namespace) -> int:
    q = query_from_args(args)
    if importlib.util.find_spec("psycopg") is None:
        raise UsageError("the report needs psycopg 3: pip install 'shoe-controller[archive]'")
    import psycopg

    dsn = dsn_from(args)
    from controller.archive.db import connect

    conn = connect(dsn, autocommit=True, application_name="shoe-controller report")
    try:
        conn.execute("SET default_transaction_read_only = on")
        rep = report(conn, q)
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RuntimeFailure(f"the archive query failed: {first}") from None
    finally:
        conn.close()
    if args.json:
        sys.stdout.write(json.dumps(rep, indent=None, separators=(",", ":")) + "\n")
    elif args.csv:
        sys.stdout.write(render_csv(rep))
    else:
        sys.stdout.write(visible_lines(render_text(rep)))
    return 0
