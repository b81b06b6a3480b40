"""``shoe-controller history ...``: surveillance review of a journal
read-only and safe while the daemon runs.

``shoes``, ``coups``, ``coup SHOE N`` (one coup's timeline), ``errors CODE``
print an aligned table (``--json``: one JSON document; ``--csv``: CSV with a
header row); ``report SHOE --html OUT [--pdf OUT]`` writes the shoe report.
The queries are ``controller.history``; the pages ``controller.history_html``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from controller.errors import RuntimeFailure, UsageError
from controller.events import format_ts
from controller.history import ENTRY_COLUMNS, MAX_LIMIT, Page, Reader, describe, parse_time
from controller.textsafe import csv_cell, visible

#: Chromium's print to PDF gives up after this long.
PDF_TIMEOUT_S = 120.0
_CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def journal_path(args: argparse.Namespace) -> Path:
    """``--journal``, else the ``journal`` of ``-c CONFIG``, else the
    daemon's own default (``./var/journal.sqlite3``, as ``run`` without a
    config uses)."""
    if args.journal:
        return Path(args.journal)
    if args.config:
        from controller.config import load_client_config

        return Path(load_client_config(args.config).journal)
    from controller.config import default_config

    return Path(default_config().journal)


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _cell(value: Any) -> str:
    """A cell of the terminal table: its text with every control character
    (a command's reason, a device's text, from any journal) shown escaped
    (``textsafe.visible``), so no cell can move the cursor or start a line."""
    return visible(_plain(value))


def write_table(out: TextIO, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Aligned columns; the last column is never padded (it may be long)."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    header = [c.upper() for c in columns]
    for line in [header, *cells]:
        padded = [v.ljust(widths[i]) for i, v in enumerate(line[:-1])] + [line[-1]]
        out.write("  ".join(padded).rstrip() + "\n")


def write_csv(out: TextIO, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([csv_cell(_plain(r.get(c))) for c in columns])


def _emit(
    args: argparse.Namespace, doc: Any, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> None:
    out = sys.stdout
    if args.json:
        json.dump(doc, out, ensure_ascii=False, separators=(",", ":"))
        out.write("\n")
    elif args.csv:
        write_csv(out, columns, rows)
    else:
        write_table(out, columns, rows)


def _page(args: argparse.Namespace, query: str, p: Page, **params: Any) -> None:
    doc = {
        "journal": str(args.journal_path),
        "query": query,
        **{k: v for k, v in params.items() if v is not None},
        "limit": p.limit,
        "truncated": p.truncated,
        "rows": p.rows,
    }
    if not p.rows and not args.json and not args.csv:
        print(f"history {visible(query)}: nothing matched", file=sys.stderr)
        return
    _emit(args, doc, p.columns, p.rows)
    if p.truncated:
        print(
            f"history {visible(query)}: {len(p.rows)} rows shown, more matched:"
            f" raise --limit (at most {MAX_LIMIT}) or narrow the query",
            file=sys.stderr,
        )


def missing_journal(args: argparse.Namespace, path: Path) -> str | None:
    """What to say when no journal is at ``path``, by where the path came
    from (None when there is one, or something else is there: the reader
    says what). A config's relative ``journal`` is the daemon's, relative to
    the directory it runs in, which need not be this one."""
    if os.path.lexists(path):
        return None
    if args.journal:
        return f"{path}: no journal there (--journal)"
    if args.config:
        raw = str(path)
        if not path.is_absolute():
            return (
                f"{path.absolute()}: no journal there: {args.config} gives journal: {raw}, relative to"
                " the directory its daemon runs in (under systemd, the unit's WorkingDirectory), not to"
                f" this one ({os.getcwd()}); run from there, or give --journal PATH"
            )
        return f"{path}: no journal there (the journal of {args.config}; has its daemon started?)"
    return f"{path}: no journal there (give --journal PATH or -c CONFIG)"


def _time(value: str | None, name: str) -> float | None:
    return None if value is None else parse_time(value, name=name)


def run(args: argparse.Namespace) -> int:
    if args.json and args.csv:
        raise UsageError("--json and --csv: choose one")
    args.journal_path = journal_path(args)
    missing = missing_journal(args, args.journal_path)
    if missing is not None:
        raise RuntimeFailure(missing)
    reader = Reader(args.journal_path)
    action = args.action
    if action == "shoes":
        _page(args, "shoes", reader.shoes(args.limit))
    elif action == "coups":
        since, until = _time(args.since, "--since"), _time(args.until, "--until")
        if args.shoe is None and since is None and until is None:
            raise UsageError("history coups: give --shoe ID, or --since T and/or --until T")
        p = reader.coups(args.shoe, since, until, args.limit)
        _page(
            args,
            "coups",
            p,
            shoe=args.shoe,
            since=format_ts(since) if since is not None else None,
            until=format_ts(until) if until is not None else None,
        )
    elif action == "coup":
        tl = reader.timeline(args.shoe, args.coup)
        doc = {"journal": str(args.journal_path), **{k: v for k, v in tl.items() if k != "columns"}}
        if not args.json and not args.csv:
            head = (
                f"table {tl.get('table')}  shoe {tl['shoe']}  coup {tl['coup']}  {str(tl['status']).upper()}"
            )
            print(visible(head))
            if tl.get("result"):
                print(f"result: {visible(describe(tl['result']))}")
            for fix in tl.get("corrections") or []:  # the last is the result in force
                print(f"now:    {visible(describe(fix))}")
            if tl.get("void"):
                print(f"void:   {visible(describe(tl['void']))}")
            print()
        _emit(args, doc, ENTRY_COLUMNS, tl["entries"])
    elif action == "errors":
        since, until = _time(args.since, "--since"), _time(args.until, "--until")
        p = reader.errors(args.code, args.shoe, since, until, args.limit)
        _page(args, f"errors {args.code.upper()}", p, code=args.code.upper(), shoe=args.shoe)
    elif action == "report":
        return _report(args, reader)
    else:  # pragma: no cover - argparse keeps to the choices
        raise UsageError(f"unknown history action {action!r}")
    return 0


# --- the shoe report ------------------------------------------------------------


def find_chromium(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in _CHROMIUMS:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium(explicit: str | None = None) -> str:
    binary = find_chromium(explicit)
    if binary is None:
        where = f"{explicit} is not an executable" if explicit else "no chromium on PATH"
        raise RuntimeFailure(
            f"--pdf needs Chromium ({where}): install it with 'sudo apt-get install chromium'"
            " (or give --chromium PATH), or print the --html page from a browser"
        )
    return binary


def print_pdf(html_path: Path, pdf_path: Path, chromium: str | None = None) -> None:
    """Chromium's own print of the page to PDF (headless, a throw-away
    profile, no header or footer lines)."""
    binary = require_chromium(chromium)
    with tempfile.TemporaryDirectory(prefix="shoe-report-") as profile:
        target = pdf_path.resolve()
        cmd = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            f"--user-data-dir={profile}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={target}",
            html_path.resolve().as_uri(),
        ]
        env = {**os.environ, "HOME": profile}
        try:
            target.unlink(missing_ok=True)
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=PDF_TIMEOUT_S, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"Chromium did not print the PDF within {PDF_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise RuntimeFailure(f"cannot run {binary}: {exc.strerror or exc}") from None
        if proc.returncode != 0 or not target.exists() or target.stat().st_size == 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise RuntimeFailure(f"Chromium could not print {pdf_path} (exit {proc.returncode}): {last}")


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RuntimeFailure(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_events(args: argparse.Namespace, reader: Reader) -> None:
    """The shoe's signed events for ``verify --events``: a first
    line saying what the file is (the table's key list with it), then each
    event line exactly as journalled."""
    from controller.commands.verify import REPORT_FORMAT

    keys, lines = reader.shoe_lines(args.shoe)
    table = None
    if lines:
        with contextlib.suppress(ValueError, AttributeError):
            table = json.loads(lines[0]).get("table")
    head = {"format": REPORT_FORMAT, "table": table, "shoe": args.shoe, "keys": keys}
    text = json.dumps(head, separators=(",", ":")) + "\n" + "".join(line + "\n" for line in lines)
    _write(Path(args.events), text)
    print(
        f"report: shoe {visible(args.shoe)}, {len(lines)} events written to {visible(args.events)}",
        file=sys.stderr,
    )


def _report(args: argparse.Namespace, reader: Reader) -> int:
    from controller.history_html import report_page

    if args.events:
        _write_events(args, reader)
        if not args.html and not args.pdf:
            return 0
    if not args.html and not args.pdf:
        raise UsageError("history report: give --html OUT and/or --pdf OUT (or --events OUT)")
    if args.pdf:
        require_chromium(args.chromium)  # before any work
    rep = reader.shoe_report(args.shoe)
    html = report_page(rep, generated=format_ts(time.time()))
    if args.json:
        json.dump({k: v for k, v in rep.items() if k != "roads"}, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    wrote = []
    if args.html:
        _write(Path(args.html), html)
        wrote.append(args.html)
    if args.pdf:
        if args.html:
            print_pdf(Path(args.html), Path(args.pdf), args.chromium)
        else:
            with tempfile.TemporaryDirectory(prefix="shoe-report-") as tmp:
                page = Path(tmp) / "report.html"
                _write(page, html)
                print_pdf(page, Path(args.pdf), args.chromium)
        wrote.append(args.pdf)
    stats = rep["statistics"]
    print(
        f"report: shoe {visible(rep['shoe'])}, {stats['coups']} coups"
        f" ({stats['settled']} settled, {stats['void']} void),"
        f" {len(rep['errors'])} dealing errors, written to {visible(' and '.join(wrote))}",
        file=sys.stderr,
    )
    return 0
