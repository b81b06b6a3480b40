"""HTML pages of the surveillance review: the
shoe report and the read-only history pages the board serves.

Owns: turning what ``controller.history`` answers into self-contained HTML
(inline CSS with print styles, no script, nothing fetched from anywhere: a
table box is offline and a report is archived). Everything that comes from
the journal is escaped; links are built from URL-quoted path segments.
The roads are drawn by ``controller.roads.render_svg``, as for
``shoe-controller roads --svg``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from controller.history import ENTRY_COLUMNS, Page, command_text, describe
from controller.roads import render_svg

_CSS = """
:root { --b: #d32f2f; --p: #1565c0; --t: #2e7d32; --ink: #222; --rule: #ccc; }
* { box-sizing: border-box; }
body { font: 13px/1.45 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: var(--ink);
       margin: 24px auto; max-width: 1100px; padding: 0 16px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 22px 0 6px; border-bottom: 2px solid var(--ink); padding-bottom: 2px; }
.sub { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { border: 1px solid var(--rule); padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f1f1ec; font-weight: 600; }
td.ts { white-space: nowrap; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 11px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.kv { width: auto; }
.kv th { width: 14em; }
.mono, code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
.banker { color: var(--b); font-weight: 600; }
.player { color: var(--p); font-weight: 600; }
.tie { color: var(--t); font-weight: 600; }
.void, .refused { color: #b00020; font-weight: 600; }
.k-misdeal td, .k-alert td { background: #fff4e5; }
.k-void td { background: #fde7e9; }
.k-result td { background: #e8f5e9; }
.k-command td { background: #e8eaf6; }
.roads svg { max-width: 100%; height: auto; }
.none { color: #777; font-style: italic; }
nav { margin-bottom: 10px; }
footer { margin-top: 24px; color: #666; font-size: 11px; border-top: 1px solid var(--rule);
         padding-top: 6px; }
@page { size: A4 landscape; margin: 12mm; }
@media print {
  body { margin: 0; max-width: none; padding: 0; font-size: 10.5px; }
  nav { display: none; }
  h2 { break-after: avoid; }
  tr, .roads { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""


def _e(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return escape(" ".join(str(v) for v in value))
    if isinstance(value, dict):
        return escape(", ".join(f"{k} {v}" for k, v in value.items()))
    return escape(str(value))


def quote(segment: Any) -> str:
    return urllib.parse.quote(str(segment), safe="")


def page(title: str, body: str, nav: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{escape(title)}</title>'
        f"<style>{_CSS}</style></head><body>"
        + (f"<nav>{nav}</nav>" if nav else "")
        + body
        + "</body></html>\n"
    )


def _table(
    columns: Sequence[str],
    rows: Iterable[Mapping[str, Any]],
    *,
    links: Mapping[str, Any] | None = None,
    row_class: str | None = None,
    numeric: Iterable[str] = (),
) -> str:
    nums = set(numeric)
    head = "".join(
        f"<th{' class=num' if c in nums else ''}>{escape(c.replace('_', ' '))}</th>" for c in columns
    )
    body = []
    for row in rows:
        cells = []
        for c in columns:
            text = _e(row.get(c))
            if links and c in links and links[c](row):
                text = f'<a href="{escape(links[c](row))}">{text}</a>'
            cls = []
            if c in nums:
                cls.append("num")
            if c == "ts":
                cls.append("ts")
            if c in ("winner", "outcome", "status") and isinstance(row.get(c), str):
                cls.append(escape(str(row[c]).split(" ")[0].split(":")[0], quote=True))
            attr = f' class="{" ".join(cls)}"' if cls else ""
            cells.append(f"<td{attr}>{text}</td>")
        rc = f' class="k-{escape(str(row.get(row_class)))}"' if row_class else ""
        body.append(f"<tr{rc}>{''.join(cells)}</tr>")
    if not body:
        return '<p class="none">none</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _kv(pairs: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in pairs)
    return f'<table class="kv">{rows}</table>'


def _truncated(p: Page) -> str:
    if not p.truncated:
        return ""
    return f'<p class="none">showing {len(p.rows)} rows; more matched (limit {p.limit})</p>'


# --- history pages (the board) ----------------------------------------------


def shoes_page(table: str, base: str, p: Page) -> str:
    t = quote(table)
    body = f"<h1>Table {escape(table)}: shoes</h1>"
    body += '<p class="sub">Read-only review of the journal. A shoe links to its coups and its report.</p>'
    body += _table(
        (*p.columns, "report"),
        [{**r, "report": "report" if r["status"] == "ended" else ""} for r in p.rows],
        links={
            "shoe": lambda r: f"{base}/history/{t}?shoe={quote(r['shoe'])}",
            "report": lambda r: (
                f"{base}/history/{t}/report/{quote(r['shoe'])}" if r["status"] == "ended" else ""
            ),
        },
        numeric=("coups", "settled", "void", "banker", "player", "tie"),
    )
    return page(f"{table}: shoes", body + _truncated(p))


def coups_page(table: str, base: str, heading: str, p: Page) -> str:
    t = quote(table)
    body = f"<h1>Table {escape(table)}: {escape(heading)}</h1>"
    body += _table(
        p.columns,
        p.rows,
        links={"coup": lambda r: f"{base}/history/{t}/coup/{quote(r['shoe'])}/{int(r['coup'])}"},
        numeric=("coup", "player_total", "banker_total"),
    )
    nav = f'<a href="{escape(base)}/history/{t}">all shoes</a>'
    return page(f"{table}: {heading}", body + _truncated(p), nav)


def errors_page(table: str, base: str, code: str, p: Page) -> str:
    t = quote(table)
    body = f"<h1>Table {escape(table)}: coups with {escape(code)}</h1>"
    body += _table(
        p.columns,
        p.rows,
        links={
            "coup": lambda r: (
                f"{base}/history/{t}/coup/{quote(r['shoe'])}/{int(r['coup'])}"
                if r.get("coup") is not None
                else ""
            )
        },
    )
    nav = f'<a href="{escape(base)}/history/{t}">all shoes</a>'
    return page(f"{table}: {code}", body + _truncated(p), nav)


def timeline_body(tl: Mapping[str, Any]) -> str:
    status = str(tl["status"])
    summary: list[tuple[str, Any]] = [
        ("Table", _e(tl.get("table"))),
        ("Shoe", f'<span class="mono">{_e(tl["shoe"])}</span>'),
        ("Coup", _e(tl["coup"])),
        ("Status", f'<span class="{escape(status)}">{_e(status)}</span>'),
        ("First event", _e(tl["first_ts"])),
        ("Closed", _e(tl.get("closed_ts")) or "not closed"),
    ]
    if tl.get("result"):
        summary.append(("Result", _e(describe(tl["result"]))))
    for fix in tl.get("corrections") or []:  # the last is the result in force
        summary.append(("Corrected", _e(describe(fix))))
    if tl.get("void"):
        summary.append(("Void", f'<span class="void">{_e(describe(tl["void"]))}</span>'))
    body = _kv(summary)
    body += "<h2>Timeline</h2>"
    body += _table(ENTRY_COLUMNS, tl["entries"], row_class="kind", numeric=("seq",))
    body += (
        "<p class=\"sub\">Times are the device's read times (UTC). A command's outcome is read from the"
        " events made at its time: the journal records each command, not the reply sent.</p>"
    )
    return body


def timeline_page(table: str, base: str, tl: Mapping[str, Any]) -> str:
    t = quote(table)
    body = f"<h1>Coup {int(tl['coup'])} of shoe {escape(str(tl['shoe']))}</h1>" + timeline_body(tl)
    nav = (
        f'<a href="{escape(base)}/history/{t}">all shoes</a> · '
        f'<a href="{escape(base)}/history/{t}?shoe={quote(tl["shoe"])}">coups of this shoe</a>'
    )
    return page(f"{table} {tl['shoe']} coup {tl['coup']}", body, nav)


# --- the shoe report ---------------------------------------------------------


def report_page(rep: Mapping[str, Any], *, coup_link: str | None = None, generated: str = "") -> str:
    """The printable shoe report. ``coup_link`` (a prefix such as
    ``/history/T01/coup/<shoe>``) links coup numbers to their timelines."""
    started = rep.get("started") or {}
    ended = rep["ended"]
    body = (
        f"<h1>Shoe report: table {_e(rep.get('table'))}, shoe <span class=mono>{_e(rep['shoe'])}</span></h1>"
    )
    body += (
        f'<p class="sub">{_e(started.get("ts"))} to {_e(ended.get("ts"))} (UTC) · profile '
        f"{_e(started.get('profile'))}, {_e(started.get('decks'))} decks"
        f" · ended: {_e(ended.get('reason'))}</p>"
    )
    body += _report_tally(rep)
    body += '<h2>Roads</h2><div class="roads">'
    body += render_svg(rep["roads"], "")
    body += "</div>"
    body += _report_procedure(rep, coup_link)
    body += _report_voids_and_errors(rep, coup_link)
    body += "<h2>Supervisor commands</h2>"
    body += _table(
        ("ts", "command"),
        [{"ts": c["ts"], "command": command_text(c)} for c in rep["commands"]],
    )
    body += "<h2>Security alerts</h2>"
    body += _table(("ts", "code", "coup", "detail"), rep["alerts"])
    body += _report_statistics(rep["statistics"])
    body += (
        f"<footer>shoe-controller history report · from {_e(rep.get('journal'))}"
        + (f" · generated {_e(generated)}" if generated else "")
        + "</footer>"
    )
    return page(f"Shoe report {rep.get('table')} {rep['shoe']}", body)


def _coup_ref(n: Any, coup_link: str | None) -> str:
    """Coup ``n``, linked to its timeline under ``coup_link`` if given."""
    if n is None:
        return ""
    if coup_link:
        return f'<a href="{escape(coup_link)}/{int(n)}">{int(n)}</a>'
    return _e(n)


def _report_tally(rep: Mapping[str, Any]) -> str:
    """The winners' tally and the coups' counts."""
    stats = rep["statistics"]
    tally = rep["tally"]
    body = "<h2>Tally</h2>"
    body += _kv(
        [
            (
                "Banker",
                f'<span class="banker">{_e(tally.get("banker", 0))}</span> ({_e(stats["banker_share"])})',
            ),
            (
                "Player",
                f'<span class="player">{_e(tally.get("player", 0))}</span> ({_e(stats["player_share"])})',
            ),
            ("Tie", f'<span class="tie">{_e(tally.get("tie", 0))}</span> ({_e(stats["tie_share"])})'),
            ("Coups", f"{_e(stats['coups'])}" + ("" if stats.get("coups_exact", True) else " (not exact)")),
            ("Settled / void / demo", f"{_e(stats['settled'])} / {_e(stats['void'])} / {_e(stats['demo'])}"),
        ]
    )
    return body


def _report_procedure(rep: Mapping[str, Any], coup_link: str | None) -> str:
    """The shoe's procedure: shuffler commitment, burn, cut card, device."""
    burn = rep.get("burn") or {}
    cut = rep.get("cut_card") or {}
    dev = rep.get("device") or {}
    body = "<h2>Shoe procedure</h2>"
    burn_cards = " ".join(str(c.get("card") or "??") for c in rep.get("burn_cards") or [])
    body += _kv(
        [
            (
                "Shuffler commitment",
                f'<span class="mono">{_e(rep.get("shuffle_commit")) or "none reported"}</span>',
            ),
            (
                "Burn",
                f"first card {_e(burn.get('first_card')) or '?'}, {_e(burn.get('burned'))} burned"
                + (f' <span class="mono">({_e(burn_cards)})</span>' if burn_cards else "")
                if burn
                else '<span class="none">no burn recorded</span>',
            ),
            (
                "Cut card",
                f"came out in coup {_coup_ref(cut.get('coup'), coup_link)} at {_e(cut.get('ts'))};"
                f" last coup {_coup_ref(cut.get('last_coup'), coup_link)}"
                if cut
                else '<span class="none">not seen</span>',
            ),
            (
                "Device",
                _e(" ".join(str(dev.get(k, "")) for k in ("model", "firmware", "serial")).strip())
                or "unknown",
            ),
        ]
    )
    return body


def _report_voids_and_errors(rep: Mapping[str, Any], coup_link: str | None) -> str:
    """The void coups and the dealing errors, each coup linked to its timeline."""
    body = "<h2>Void coups</h2>"
    body += _table(
        ("coup", "ts", "code", "detail", "cards", "misdeals"),
        [
            {
                "coup": v.get("coup"),
                "ts": v.get("ts"),
                "code": v.get("code"),
                "detail": v.get("detail"),
                "cards": [f"{c.get('position')}={c.get('card') or '??'}" for c in v.get("cards") or []],
                "misdeals": [f"{m.get('code')} {m.get('action')}" for m in v.get("misdeals") or []],
            }
            for v in rep["voids"]
        ],
        links={"coup": (lambda r: f"{coup_link}/{int(r['coup'])}") if coup_link else (lambda r: "")},
    )
    body += "<h2>Dealing errors and their resolution</h2>"
    body += _table(
        ("coup", "ts", "code", "first_action", "resolution", "outcome"),
        rep["errors"],
        links={
            "coup": (lambda r: f"{coup_link}/{int(r['coup'])}" if r.get("coup") is not None else "")
            if coup_link
            else (lambda r: "")
        },
    )
    return body


def _report_statistics(stats: Mapping[str, Any]) -> str:
    """The shoe's statistics."""
    body = "<h2>Statistics</h2>"
    body += _kv(
        [
            ("Cards dealt", _e(stats.get("cards_dealt"))),
            ("Naturals", _e(stats.get("naturals"))),
            (
                "Player pairs / Banker pairs",
                f"{_e(stats.get('player_pairs'))} / {_e(stats.get('banker_pairs'))}",
            ),
            ("Side-bet facts", _e(stats.get("tags")) or "none"),
            (
                "Longest Banker / Player run",
                f"{_e(stats['longest_banker_run'])} / {_e(stats['longest_player_run'])}",
            ),
            ("Coups settled after a correction", _e(stats.get("corrected_coups"))),
            ("Misdeals (counted by the engine)", _e(stats.get("misdeals")) or "none"),
            ("Duration", f"{float(stats.get('duration_s') or 0.0) / 60.0:.1f} min"),
        ]
    )
    return body
