"""The surveillance review on the web: read-only HTML
pages and a JSON API over each table's journal, mounted by the board
(``shoe-controller board``) with ``history_routes``.

Routes (``{table}`` is a key of the mapping given; anything else is 404):

* ``GET /history/{table}``: the shoes; ``?shoe=ID`` the coups of a shoe,
  ``?code=CODE`` the coups with a dealing error, ``?since=T&until=T`` the
  coups closed in a time range (``limit`` on all three);
* ``GET /history/{table}/coup/{shoe}/{coup}``: one coup's timeline (a road's
  cell links here);
* ``GET /history/{table}/report/{shoe}``: the printable shoe report;
* ``GET /api/history/{table}`` (or ``/shoes``), ``/api/history/{table}/coups``,
  ``/api/history/{table}/coup/{shoe}/{coup}``, ``/api/history/{table}/errors/{code}``,
  ``/api/history/{table}/report/{shoe}``: the same as JSON, as
  ``shoe-controller history --json`` prints it.

``coup_url`` and ``report_url`` build the links (a road's cell to its
coup's timeline). Every request opens the journal read-only for one snapshot (see
``controller.history``), in Starlette's thread pool, so a slow query never
holds up the board's live pages. A bad path or query parameter is a 400, an
unknown table, shoe or coup a 404, a report of a shoe still in play a 409,
a journal that cannot be read a 503: each with a one-line body (text for
pages, ``{"error": ...}`` for the API) that names the table, never the
journal's path on the server. Pages carry a Content-Security-Policy that
allows no script and nothing fetched.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from controller import history_html
from controller.history import (
    HistoryError,
    NotEnded,
    NotFound,
    Page,
    QueryError,
    Reader,
    check_code,
    check_coup,
    check_shoe,
    parse_time,
)

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}


class _Reply(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def coup_url(table: str, shoe: str, coup: int, root: str = "") -> str:
    """The timeline page of one coup, for a link from the road (``root``:
    the path the routes are mounted under, if any)."""
    q = history_html.quote
    return f"{root.rstrip('/')}/history/{q(table)}/coup/{q(shoe)}/{int(coup)}"


def report_url(table: str, shoe: str, root: str = "") -> str:
    """The report page of an ended shoe."""
    q = history_html.quote
    return f"{root.rstrip('/')}/history/{q(table)}/report/{q(shoe)}"


def history_routes(journals: Mapping[str, pathlib.Path]) -> list[BaseRoute]:
    """The history pages and API for these tables (table id -> journal path)."""
    readers = {str(t): Reader(p) for t, p in journals.items()}

    def page(work: Callable[[Request, str, Reader], Any]) -> Callable[[Request], Response]:
        return _endpoint(readers, False, work)

    def api(work: Callable[[Request, str, Reader], Any]) -> Callable[[Request], Response]:
        return _endpoint(readers, True, work)

    return [
        Route("/history/{table}", page(_index_page), methods=["GET"]),
        Route("/history/{table}/coup/{shoe}/{coup}", page(_coup_page), methods=["GET"]),
        Route("/history/{table}/report/{shoe}", page(_report_page), methods=["GET"]),
        Route("/api/history/{table}", api(_api_shoes), methods=["GET"]),
        Route("/api/history/{table}/shoes", api(_api_shoes), methods=["GET"]),
        Route("/api/history/{table}/coups", api(_api_coups), methods=["GET"]),
        Route("/api/history/{table}/coup/{shoe}/{coup}", api(_api_coup), methods=["GET"]),
        Route("/api/history/{table}/errors/{code}", api(_api_errors), methods=["GET"]),
        Route("/api/history/{table}/report/{shoe}", api(_api_report), methods=["GET"]),
    ]


def _reader(readers: Mapping[str, Reader], request: Request) -> tuple[str, Reader]:
    table = str(request.path_params["table"])
    r = readers.get(table)
    if r is None:
        raise _Reply(404, f"no table {table[:40]!r} here")
    return table, r


def _endpoint(
    readers: Mapping[str, Reader], api: bool, work: Callable[[Request, str, Reader], Any]
) -> Callable[[Request], Response]:
    """A route's handler: ``work`` on the table's reader, its refusals
    answered as one line (JSON for the API, text for a page)."""

    def handle(request: Request) -> Response:
        table = str(request.path_params.get("table", ""))
        try:
            table, r = _reader(readers, request)
            try:
                body = work(request, table, r)
            except (QueryError, HistoryError) as exc:
                # never the journal's path on the server: the table names it
                message = str(exc).replace(str(r.path), f"table {table}'s journal")
                status = (
                    400
                    if isinstance(exc, QueryError)
                    else 404
                    if isinstance(exc, NotFound)
                    else 409
                    if isinstance(exc, NotEnded)
                    else 503
                )
                raise _Reply(status, message) from None
        except _Reply as reply:
            line = " ".join(str(reply).split())
            if api:
                return JSONResponse({"error": line}, status_code=reply.status, headers=_HEADERS)
            return PlainTextResponse(line + "\n", status_code=reply.status, headers=_HEADERS)
        if api:
            return JSONResponse(body, headers=_HEADERS)
        return HTMLResponse(body, headers=_HEADERS)

    return handle


def _query(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return value if value not in (None, "") else None


def _when(request: Request, name: str) -> float | None:
    value = _query(request, name)
    return None if value is None else parse_time(value, name=name)


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


# --- pages -----------------------------------------------------------


def _index_page(request: Request, table: str, r: Reader) -> str:
    limit = _query(request, "limit")
    shoe, code = _query(request, "shoe"), _query(request, "code")
    since, until = _when(request, "since"), _when(request, "until")
    if code is not None:
        c = check_code(code)
        p = r.errors(c, shoe, since, until, limit)
        return history_html.errors_page(table, _root(request), c, p)
    if shoe is not None or since is not None or until is not None:
        p = r.coups(shoe, since, until, limit)
        heading = f"coups of shoe {shoe}" if shoe is not None else "coups in a time range"
        return history_html.coups_page(table, _root(request), heading, p)
    return history_html.shoes_page(table, _root(request), r.shoes(limit))


def _coup_page(request: Request, table: str, r: Reader) -> str:
    shoe = check_shoe(str(request.path_params["shoe"]))
    tl = r.timeline(shoe, check_coup(str(request.path_params["coup"])))
    return history_html.timeline_page(table, _root(request), tl)


def _report_page(request: Request, table: str, r: Reader) -> str:
    shoe = check_shoe(str(request.path_params["shoe"]))
    rep = r.shoe_report(shoe)
    rep["journal"] = f"table {table}'s journal"  # never the path on the server
    link = f"{_root(request)}/history/{history_html.quote(table)}/coup/{history_html.quote(shoe)}"
    return history_html.report_page(rep, coup_link=link)


# --- the API ------------------------------------------------------------


def _page_doc(query_name: str, p: Page, **params: Any) -> dict[str, Any]:
    return {
        "query": query_name,
        **{k: v for k, v in params.items() if v is not None},
        "limit": p.limit,
        "truncated": p.truncated,
        "rows": p.rows,
    }


def _api_shoes(request: Request, table: str, r: Reader) -> dict[str, Any]:
    return {"table": table, **_page_doc("shoes", r.shoes(_query(request, "limit")))}


def _api_coups(request: Request, table: str, r: Reader) -> dict[str, Any]:
    shoe = _query(request, "shoe")
    p = r.coups(shoe, _when(request, "since"), _when(request, "until"), _query(request, "limit"))
    return {"table": table, **_page_doc("coups", p, shoe=shoe)}


def _api_coup(request: Request, table: str, r: Reader) -> dict[str, Any]:
    shoe = check_shoe(str(request.path_params["shoe"]))
    tl = r.timeline(shoe, check_coup(str(request.path_params["coup"])))
    return {k: v for k, v in tl.items() if k != "columns"}


def _api_errors(request: Request, table: str, r: Reader) -> dict[str, Any]:
    code = check_code(str(request.path_params["code"]))
    p = r.errors(
        code,
        _query(request, "shoe"),
        _when(request, "since"),
        _when(request, "until"),
        _query(request, "limit"),
    )
    return {"table": table, **_page_doc("errors", p, code=code, shoe=_query(request, "shoe"))}


def _api_report(request: Request, table: str, r: Reader) -> dict[str, Any]:
    rep = r.shoe_report(check_shoe(str(request.path_params["shoe"])))
    rep.pop("journal", None)
    return rep
