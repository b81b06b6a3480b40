"""The history pages and API the board mounts, through
Starlette's TestClient on the scripted journal of ``test_history``: the
same answers as the command line, bounds on every path and query
parameter (a one-line 400/404/409/503, never a traceback, never the
journal's path), and journal text escaped in every page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from controller.history import MAX_LIMIT
from controller.history_web import coup_url, history_routes, report_url
from tests.test_history import HOSTILE, build


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("history_web")
    data = build(base / "journal.sqlite3")
    broken = base / "broken.sqlite3"
    broken.write_text("not a journal\n")
    app = Starlette(
        routes=history_routes({"T09": data["path"], "T10": broken, "T11": base / "missing.sqlite3"})
    )
    return {**data, "client": TestClient(app, raise_server_exceptions=False), "base": base}


def get(site: dict[str, Any], url: str) -> Any:
    return site["client"].get(url)


def one_line(body: str) -> str:
    lines = body.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in body, body
    return lines[0]


def test_the_shoes_page_links_each_shoe_to_its_coups_and_ended_shoes_to_their_report(
    site: dict[str, Any],
) -> None:
    r = get(site, "/history/T09")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    first, second = site["shoes"]
    assert f'href="/history/T09?shoe={first}"' in r.text
    assert f'href="/history/T09/report/{first}"' in r.text
    assert f'href="/history/T09/report/{second}"' not in r.text, "a shoe in play has no report yet"
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_the_coups_page_links_every_coup_to_its_timeline(site: dict[str, Any]) -> None:
    shoe = site["shoes"][0]
    r = get(site, f"/history/T09?shoe={shoe}")
    assert r.status_code == 200
    links = re.findall(rf'href="/history/T09/coup/{shoe}/(\d+)"', r.text)
    assert links == ["1", "2", "3", "4", "5"]


def test_a_coups_timeline_page_shows_its_commands_and_escapes_the_journal(site: dict[str, Any]) -> None:
    shoe = site["shoes"][0]
    r = get(site, f"/history/T09/coup/{shoe}/3")
    assert r.status_code == 200
    assert "void id=void-1 coup=3" in r.text and "SUPERVISOR_VOID" in r.text
    assert "<script" not in r.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in r.text


def test_the_errors_and_time_range_pages(site: dict[str, Any]) -> None:
    r = get(site, "/history/T09?code=unread_card")
    assert r.status_code == 200 and "coups with UNREAD_CARD" in r.text
    assert r.text.count("/coup/") == 2
    closing = [e for e in site["events"] if e["type"] in ("coup.result", "coup.void")]
    r = get(site, f"/history/T09?since={closing[0]['ts']}&until={closing[2]['ts']}")
    assert r.status_code == 200 and r.text.count("/coup/") == 2


def test_the_report_page_is_the_shoe_report_with_coups_linked(site: dict[str, Any]) -> None:
    shoe = site["shoes"][0]
    r = get(site, f"/history/T09/report/{shoe}")
    assert r.status_code == 200 and "<h2>Roads</h2>" in r.text and "<svg" in r.text
    assert f'href="/history/T09/coup/{shoe}/3"' in r.text
    assert "<script" not in r.text and str(site["base"]) not in r.text


def test_the_api_answers_as_the_command_line_does(site: dict[str, Any]) -> None:
    shoe = site["shoes"][0]
    shoes = get(site, "/api/history/T09").json()
    assert [r["shoe"] for r in shoes["rows"]] == site["shoes"] and shoes["truncated"] is False
    assert get(site, "/api/history/T09/shoes").json() == shoes
    coups = get(site, f"/api/history/T09/coups?shoe={shoe}&limit=2").json()
    assert [r["coup"] for r in coups["rows"]] == [1, 2] and coups["truncated"] is True
    tl = get(site, f"/api/history/T09/coup/{shoe}/2").json()
    assert [c["id"] for c in tl["commands"]] == ["bad-1", "fix-1"] and tl["status"] == "settled"
    errors = get(site, "/api/history/T09/errors/SUPERVISOR_VOID").json()
    assert [r["coup"] for r in errors["rows"]] == [3] and HOSTILE in errors["rows"][0]["detail"]
    rep = get(site, f"/api/history/T09/report/{shoe}").json()
    assert rep["tally"]["banker"] == 3 and "journal" not in rep
    assert str(site["base"]) not in json.dumps(rep)


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("/history/T99", 404, "no table 'T99' here"),
        ("/api/history/T99/shoes", 404, "no table 'T99' here"),
        ("/history/T09/coup/{shoe}/0", 400, "coup: 0 is out of range"),
        ("/history/T09/coup/{shoe}/10001", 400, "coup: 10001 is out of range"),
        ("/history/T09/coup/{shoe}/x", 400, "is not a coup number"),
        ("/history/T09/coup/{shoe}/99", 404, "has no coup 99"),
        ("/history/T09/coup/NOPE/1", 404, "no shoe 'NOPE'"),
        ("/history/T09/coup/" + "x" * 65 + "/1", 400, "is not a shoe id"),
        ("/api/history/T09/coup/{shoe}/-1", 400, "coup: -1 is out of range"),
        ("/history/T09?shoe={shoe}&limit=0", 400, "limit: 0 is out of range"),
        (f"/api/history/T09/coups?shoe={{shoe}}&limit={MAX_LIMIT + 1}", 400, "limit: 10001 is out of range"),
        ("/api/history/T09/coups?since=tomorrow", 400, "since: 'tomorrow' is not a time"),
        ("/api/history/T09/coups", 400, "give --shoe ID"),
        ("/api/history/T09/errors/BOGUS", 400, "not a dealing error"),
        ("/api/history/T09/errors/a%20b", 400, "is not a dealing error code"),
        ("/history/T09/report/{shoe2}", 409, "has not ended"),
        ("/history/T10", 503, "not a shoe-controller journal"),
        ("/api/history/T11/shoes", 503, "no journal there"),
    ],
)
def test_bad_requests_get_a_one_line_answer_with_the_right_status(
    site: dict[str, Any], url: str, status: int, says: str
) -> None:
    shoe, shoe2 = site["shoes"]
    r = get(site, url.format(shoe=shoe, shoe2=shoe2))
    assert r.status_code == status, (r.status_code, r.text)
    if url.startswith("/api/"):
        assert r.headers["content-type"] == "application/json"
        line = one_line(r.text)
        assert says in json.loads(line)["error"]
    else:
        assert r.headers["content-type"].startswith("text/plain")
        assert says in one_line(r.text)
    assert str(site["base"]) not in r.text, "the journal's path on the server is never shown"


def test_only_get_is_served(site: dict[str, Any]) -> None:
    r = site["client"].post("/history/T09")
    assert r.status_code == 405
    r = site["client"].delete(f"/api/history/T09/coup/{site['shoes'][0]}/1")
    assert r.status_code == 405


def test_a_shoe_id_with_markup_is_escaped_in_the_not_found_page(site: dict[str, Any]) -> None:
    r = get(site, "/history/T09?shoe=%3Cb%3Ebold")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/plain")
    assert "<b>bold" in r.text  # text/plain, nosniff: never rendered as HTML
    assert r.headers["x-content-type-options"] == "nosniff"


def test_journal_paths_with_odd_characters_open(tmp_path: Path) -> None:
    odd = tmp_path / "a dir with ?#% chars"
    odd.mkdir()
    data = build(odd / "journal.sqlite3")
    client = TestClient(Starlette(routes=history_routes({"T09": data["path"]})))
    assert [r["shoe"] for r in client.get("/api/history/T09").json()["rows"]] == data["shoes"]


def test_the_link_helpers_point_at_the_pages(site: dict[str, Any]) -> None:
    shoe = site["shoes"][0]
    assert get(site, coup_url("T09", shoe, 2)).status_code == 200
    assert "coup 2 of shoe" in get(site, coup_url("T09", shoe, 2)).text.lower()
    assert "<h2>Roads</h2>" in get(site, report_url("T09", shoe)).text
    assert coup_url("T 1", "a?b", 3, root="/board/") == "/board/history/T%201/coup/a%3Fb/3"
