"""``shoe-controller report`` against the real PostgreSQL (127.0.0.1:5432):
events made by the real engine, archived through the archiver's own store,
and every figure of the report checked against a hand-computed value."""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.floor_year import Dealer
from controller.cli import main
from controller.floor_stats import theory
from tests.support.floor_events import archive, fresh_archive, without_bulky
from tests.table import Table

UTC = dt.UTC


def _scripted() -> list[dict[str, Any]]:
    """T01, punto banco, 8 decks, on 2026-11-20 (UTC):

    13:55:09 coup 1 player (9 v 5)    | shift 06:00
    13:55:14 coup 2 banker (5 v 9)    |
    13:55:19 coup 3 tie (7 v 7)       |
    -- ten minutes without a coup --
    14:05:24 coup 4 banker (0 v 8), a Player pair (5H 5S)  | shift 14:00
    14:05:29 coup 5 banker (7 v 9): B1 unread, entered by the supervisor
    14:05:33 coup 6 voided by the supervisor
    14:05:40 coup 7 player (8 v 2)
    """
    t = Table("punto_banco", 8, table="T01")
    t.t = dt.datetime(2026, 11, 20, 13, 55, tzinfo=UTC).timestamp()
    t.start()
    t.cards("9H", "2D", "KS", "3C")
    t.result()
    t.cards("2H", "9S", "3D", "KH")
    t.result()
    t.cards("4H", "4D", "3S", "3C")
    t.result()
    t.t += 600
    t.cards("5H", "6D", "5S", "2C")
    t.result()
    t.cards("7H", None, "KD", "KC")
    t.result()
    reply, _ = t.command(cmd="enter_card", coup=5, card="9C")
    assert reply["ok"], reply
    t.cards("8H", "8D")
    reply, _ = t.command(cmd="void", coup=6, reason="dealer dropped a card")
    assert reply["ok"], reply
    t.result()  # the dealer closes the void coup
    t.t += 3
    t.cards("8C", "2S", "KD", "QH")
    t.result()
    results = t.of_type("coup.result")
    assert [r["winner"] for r in results] == ["player", "banker", "tie", "banker", "banker", "player"]
    return t.events


def _dragon() -> list[dict[str, Any]]:
    """T02, EZ baccarat, 6 decks, 2026-11-20 14:30 UTC: one Dragon 7
    (Banker wins with a three-card 7) and one Player natural."""
    t = Table("ez_baccarat", 6, table="T02")
    t.t = dt.datetime(2026, 11, 20, 14, 30, tzinfo=UTC).timestamp()
    t.start()
    t.cards("KH", "AD", "QH", "2C", "KS", "4C")
    t.result()
    t.cards("9D", "3H", "TC", "4S")
    t.result()
    assert t.of_type("coup.result")[0]["tags"] == ["banker7", "dragon7"]
    return t.events


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    with fresh_archive("floor_report") as d:
        events = _scripted() + _dragon()
        assert archive(d, events) == len(events)
        yield d


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["report", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys: pytest.CaptureFixture[str], dsn: str, *args: str) -> dict[str, Any]:
    code, out, err = _report(capsys, "--dsn", dsn, "--json", *args)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _row(doc: dict[str, Any], table: str, period: str) -> dict[str, Any]:
    found = [r for r in doc["rows"] if r["table"] == table and r["period"] == period]
    assert len(found) == 1, [(r["table"], r["period"]) for r in doc["rows"]]
    return found[0]


SHIFTS = ("--shifts", "06:00,14:00,22:00", "--from", "2026-11-20", "--to", "2026-11-20")


def test_every_figure_of_a_shift_by_hand(capsys: pytest.CaptureFixture[str], dsn: str) -> None:
    doc = _json(capsys, dsn, *SHIFTS)
    pb = theory("punto_banco", 8)
    a = _row(doc, "T01", "2026-11-20 06:00")
    assert a["end"] == "2026-11-20T14:00"
    assert a["profiles"] == ["punto_banco/8"]
    assert a["coups"] == {"settled": 3, "demo": 0, "void": 0, "total": 3}
    assert a["void_rate"] == 0
    # two gaps of 5 s (coup 1 follows the burn, not a coup)
    assert a["dealing_hours"] == pytest.approx(10 / 3600, abs=1e-3)
    assert a["pace"] == pytest.approx(2 / (10 / 3600))
    res = a["results"]
    assert res["observed"] == {"banker": 1, "player": 1, "tie": 1}
    e = {k: 3 * float(pb.outcomes[k]) for k in ("banker", "player", "tie")}
    assert res["expected"] == {k: pytest.approx(v, abs=1e-3) for k, v in e.items()}
    chi2 = sum((1 - v) ** 2 / v for v in e.values())
    assert res["chi2"] == pytest.approx(chi2, abs=1e-4)
    assert res["df"] == 2 and res["low_expected"] and not res["flagged"]

    assert res["p"] == pytest.approx(math.exp(-chi2 / 2), rel=1e-9)  # 2 df: p = e^(-x/2)
    # a unit on every coup: banker -1 + 0.95 + 0 ; player +1 - 1 + 0 ; tie -1 - 1 + 8
    assert a["hold"]["banker"]["observed"] == pytest.approx(0.05 / 3)
    assert a["hold"]["player"]["observed"] == pytest.approx(0.0)
    assert a["hold"]["tie"]["observed"] == pytest.approx(-2.0)
    assert a["hold"]["player_pair"]["observed"] == pytest.approx(1.0)
    assert a["hold"]["banker"]["theoretical"] == pytest.approx(float(pb.bets["banker"].hold), abs=1e-6)
    assert a["hold"]["tie"]["stderr"] == pytest.approx(pb.bets["tie"].sd / math.sqrt(3), abs=1e-6)
    assert a["side_bets"]["player_pair"]["hits"] == 0
    assert a["side_bets"]["player_pair"]["expected"] == pytest.approx(3 * 31 / 415, abs=1e-3)
    assert a["errors"] == {} and a["interventions"] == {} and not a["flagged"]

    b = _row(doc, "T01", "2026-11-20 14:00")
    assert b["coups"] == {"settled": 3, "demo": 0, "void": 1, "total": 4}
    assert b["void_rate"] == pytest.approx(0.25)
    # coup 4 follows ten idle minutes (not dealing); then 5, 6 and 7
    gaps = [dt.datetime(2026, 11, 20, 14, 5, s, tzinfo=UTC).timestamp() for s in (24, 29, 33)] + [
        _coup_ts(dsn, "T01", 7)
    ]
    dealing = sum(b2 - b1 for b1, b2 in itertools.pairwise(gaps))
    assert b["dealing_hours"] == pytest.approx(dealing / 3600, abs=1e-3)
    assert b["pace"] == pytest.approx(3 / (dealing / 3600), rel=1e-3)
    assert b["results"]["observed"] == {"banker": 2, "player": 1, "tie": 0}
    assert b["side_bets"]["player_pair"]["hits"] == 1
    assert b["side_bets"]["banker_pair"]["hits"] == 0
    # banker +0.95 +0.95 -1 ; player pair +11 -1 -1
    assert b["hold"]["banker"]["observed"] == pytest.approx(-0.9 / 3)
    assert b["hold"]["player_pair"]["observed"] == pytest.approx(-9 / 3)
    assert b["errors"] == {
        "SUPERVISOR_VOID": {"errors": 1, "void": 1},
        "UNREAD_CARD": {"errors": 1, "void": 0},
    }
    assert b["interventions"] == {"SUPERVISOR_VOID": 1, "UNREAD_CARD": 1}

    d = _row(doc, "T02", "2026-11-20 14:00")
    ez = theory("ez_baccarat", 6)
    assert d["profiles"] == ["ez_baccarat/6"]
    assert d["side_bets"]["dragon7"]["hits"] == 1
    assert d["side_bets"]["panda8"]["hits"] == 0
    assert d["side_bets"]["dragon7"]["expected"] == pytest.approx(2 * float(ez.bets["dragon7"].hit), abs=1e-3)
    assert set(d["side_bets"]) == {"dragon7", "panda8"}
    # Dragon 7: the Banker bet pushes (0) and Dragon 7 pays 40; then Player wins
    assert d["hold"]["banker"]["observed"] == pytest.approx((0 + 1) / 2)
    assert d["hold"]["dragon7"]["observed"] == pytest.approx(-(40 - 1) / 2)
    assert doc["tests"] == 3 + 3 + 3  # per row: Banker/Player/Tie + each side bet
    assert doc["expected_false_flags"] == pytest.approx(9 * 0.001)


def _coup_ts(dsn: str, table: str, coup: int) -> float:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT ts FROM coups WHERE table_id = %s AND coup = %s", (table, coup)).fetchone()
    assert row is not None
    return float(row[0].timestamp())


def test_totals_add_the_periods_of_each_table(capsys: pytest.CaptureFixture[str], dsn: str) -> None:
    doc = _json(capsys, dsn, *SHIFTS)
    t01 = next(r for r in doc["totals"] if r["table"] == "T01")
    assert t01["period"] == "2026-11-20..2026-11-20"
    assert t01["coups"] == {"settled": 6, "demo": 0, "void": 1, "total": 7}
    assert t01["results"]["observed"] == {"banker": 3, "player": 2, "tie": 1}
    assert t01["hold"]["banker"]["observed"] == pytest.approx(-(-0.05 + 0.9) / 6)


def test_one_boundary_makes_gaming_days_and_a_time_zone_moves_them(
    capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    doc = _json(capsys, dsn, "--from", "2026-11-20", "--to", "2026-11-20", "--table", "T01")
    assert [r["period"] for r in doc["rows"]] == ["2026-11-20 00:00"]
    assert doc["rows"][0]["coups"]["total"] == 7
    # Macau is UTC+8: 13:55 UTC is 21:55 local (the 14:00 shift), 14:05 UTC
    # is 22:05 (the night shift, which starts on the 20th)
    doc = _json(
        capsys,
        dsn,
        "--tz",
        "Asia/Macau",
        "--shifts",
        "06:00,14:00,22:00",
        "--from",
        "2026-11-20",
        "--to",
        "2026-11-20",
    )
    t01 = [r for r in doc["rows"] if r["table"] == "T01"]
    assert [(r["period"], r["coups"]["total"]) for r in t01] == [
        ("2026-11-20 14:00", 3),
        ("2026-11-20 22:00", 4),
    ]
    # the gaming day from 22:00 local on the 19th (14:00 UTC) to 22:00 on the
    # 20th holds coups 1-3 (13:55 UTC) and nothing else
    doc = _json(
        capsys, dsn, "--tz", "Asia/Macau", "--shifts", "22:00", "--from", "2026-11-19", "--to", "2026-11-19"
    )
    assert [(r["table"], r["coups"]["total"]) for r in doc["rows"]] == [("T01", 3)]


def test_csv_has_one_row_per_table_and_period(capsys: pytest.CaptureFixture[str], dsn: str) -> None:
    code, out, err = _report(capsys, "--dsn", dsn, "--csv", *SHIFTS)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["table"], r["start"]) for r in rows] == [
        ("T01", "2026-11-20T06:00"),
        ("T01", "2026-11-20T14:00"),
        ("T02", "2026-11-20T14:00"),
    ]
    assert rows[1]["void"] == "1" and rows[1]["player_pair_hits"] == "1"
    assert rows[1]["error_UNREAD_CARD"] == "1" and rows[1]["interventions"] == "2"
    assert rows[2]["dragon7_hits"] == "1" and rows[0]["dragon7_hits"] == ""


def test_text_report_names_every_period_and_the_false_flag_rate(
    capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    code, out, err = _report(capsys, "--dsn", dsn, *SHIFTS)
    assert code == 0, err
    lines = out.splitlines()
    rows = [line.split()[:3] for line in lines if line.startswith(("T01 ", "T02 "))]
    assert rows[:3] == [
        ["T01", "2026-11-20", "06:00"],
        ["T01", "2026-11-20", "14:00"],
        ["T02", "2026-11-20", "14:00"],
    ]
    assert "9 tests at alpha 0.001" in out
    assert "dealing errors: SUPERVISOR_VOID 1 (1 void), UNREAD_CARD 1" in out
    assert "supervisor interventions: SUPERVISOR_VOID 1, UNREAD_CARD 1" in out


def test_a_range_without_coups_is_an_empty_report(capsys: pytest.CaptureFixture[str], dsn: str) -> None:
    doc = _json(capsys, dsn, "--from", "2026-10-01", "--to", "2026-10-31")
    assert doc["rows"] == [] and doc["tests"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--from", "2026-02-30"), "--from: '2026-02-30' is not a date (YYYY-MM-DD)"),
        (("--from", "2026-11-21", "--to", "2026-11-20"), "--from 2026-11-21 is after --to 2026-11-20"),
        (("--from", "2025-11-19", "--to", "2026-11-20"), "the date range is 367 days: at most 366"),
        (("--shifts", "6:00"), "--shifts: '6:00' is not a time of day HH:MM"),
        (("--shifts", "06:00,06:00"), "--shifts: a boundary is given twice"),
        (("--tz", "Nowhere/Land"), "--tz: unknown time zone 'Nowhere/Land'"),
        (("--table", "T 1"), "--table: 'T 1' is not a table id"),
        (("--alpha", "0"), "--alpha must be in (0, 0.5]"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, out, err = _report(capsys, "--dsn", "host=127.0.0.1 dbname=none", *args)
    assert code == 2 and out == ""
    assert err.startswith(f"shoe-controller report: {message}"), err
    assert len(err.strip().splitlines()) == 1


def test_the_longest_range_is_accepted(capsys: pytest.CaptureFixture[str], dsn: str) -> None:
    # 2024 is a leap year: 366 days is the bound, one more is refused
    assert _json(capsys, dsn, "--from", "2024-01-01", "--to", "2024-12-31")["rows"] == []
    code, _, err = _report(capsys, "--dsn", dsn, "--from", "2024-01-01", "--to", "2025-01-01")
    assert code == 2 and "367 days: at most 366" in err


def test_an_unknown_table_is_named(capsys: pytest.CaptureFixture[str], dsn: str) -> None:
    code, out, err = _report(capsys, "--dsn", dsn, "--table", "T99")
    assert code == 2 and out == ""
    assert (
        err
        == "shoe-controller report: unknown table 'T99': the archive has nothing of it (tables: T01, T02)\n"
    )


def test_an_unreachable_database_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import free_port

    code, out, err = _report(capsys, "--dsn", f"host=127.0.0.1 port={free_port()} dbname=floor")
    assert code == 1 and out == ""
    assert err.startswith("shoe-controller report: cannot connect to PostgreSQL: ") and err.count("\n") == 1


def test_a_database_without_the_archive_schema_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.postgres import temporary_database

    with temporary_database("floor_empty") as empty:
        code, _, err = _report(capsys, "--dsn", empty)
    assert code == 1
    assert "no floor archive schema: run shoe-controller archive --config FILE --migrate" in err


def test_no_database_given_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _report(capsys, "--from", "2026-11-20")
    assert code == 2 and "--dsn" in err


# --- the chi-square over the archive: a doctored table and a fair one -----------------


@pytest.fixture(scope="module")
def two_tables() -> Iterator[str]:
    start = dt.datetime(2026, 11, 10, 6, 0, tzinfo=UTC).timestamp()
    fair = Dealer("FAIR", seed=11, start=start)
    doctored = Dealer("SHORT", seed=11, start=start, without="89")
    with fresh_archive("floor_chi2") as d:
        archive(d, without_bulky(fair.deal(20_000)))
        archive(d, without_bulky(doctored.deal(20_000)))
        yield d


def test_a_shoe_without_eights_and_nines_is_flagged_and_a_fair_one_is_not(
    capsys: pytest.CaptureFixture[str], two_tables: str
) -> None:
    doc = _json(capsys, two_tables, "--from", "2026-11-10", "--to", "2026-12-31", "--shifts", "06:00")
    totals = {r["table"]: r for r in doc["totals"]}
    assert totals["FAIR"]["coups"]["settled"] == totals["SHORT"]["coups"]["settled"] == 20_000
    fair, short = totals["FAIR"], totals["SHORT"]
    assert not fair["flagged"], fair["results"]
    assert fair["results"]["p"] > 0.001
    for bet, h in fair["hold"].items():
        assert abs(h["observed"] - h["theoretical"]) < 4 * h["stderr"], bet
    assert short["flagged"] and short["results"]["flagged"], short["results"]
    assert short["results"]["observed"]["tie"] > short["results"]["expected"]["tie"]
    assert short["side_bets"]["player_pair"]["flagged"]  # 31/351 pairs, not 31/415


def test_the_dsn_comes_from_the_archivers_config(
    capsys: pytest.CaptureFixture[str], dsn: str, tmp_path: Any
) -> None:
    cfg = tmp_path / "archive.yaml"
    cfg.write_text(
        "broker: {host: 127.0.0.1, port: 1883, client_id: archive-1}\n" + f"dsn: {json.dumps(dsn)}\n"
    )
    doc = _json_cfg(capsys, str(cfg))
    assert [r["table"] for r in doc["rows"]] == ["T01", "T01", "T02"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(cfg.read_text() + "retention: 3\n")
    code, out, err = _report(capsys, "-c", str(bad), *SHIFTS)
    assert code == 2 and out == ""
    assert "retention: unknown key (did you mean 'retention_months'?)" in err and "Traceback" not in err


def _json_cfg(capsys: pytest.CaptureFixture[str], cfg: str) -> dict[str, Any]:
    code, out, err = _report(capsys, "-c", cfg, "--json", *SHIFTS)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_percentages_have_no_negative_zero() -> None:
    from controller.commands.report import _pct

    assert [_pct(0.0, 1), _pct(-0.0000001), _pct(-0.0123, 1), _pct(None)] == ["0.0%", "0.00%", "-1.2%", "-"]


def test_gaps_counts_the_events_a_table_journalled_that_the_archive_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = _scripted()
    # coup 4's P2 and B2 card events (shift 14:00, after its P1) and the last
    # event never reach the archive; a hole counts in the period of the
    # archived event before it
    lost = [e for e in events if e["type"] == "card" and e.get("coup") == 4][2:4]
    kept = [e for e in events if e not in lost and e is not events[-1]]
    with fresh_archive("floor_gaps") as d:
        assert archive(d, kept) == len(kept)
        doc = _json(capsys, d, *SHIFTS, "--gaps")
        assert [(r["period"], r["missing_events"]) for r in doc["rows"]] == [
            ("2026-11-20 06:00", 0),
            ("2026-11-20 14:00", 2),  # the last event is after every archived one: no hole shows it
        ]
        assert doc["totals"][0]["missing_events"] == 2
        code, out, _ = _report(capsys, "--dsn", d, *SHIFTS, "--gaps")
        assert code == 0 and "events missing from the archive (holes in the table's seq): 2" in out
        assert _json(capsys, d, *SHIFTS)["rows"][0]["missing_events"] is None  # not asked


def test_without_psycopg_the_report_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a)
    )
    code, out, err = _report(capsys, "--dsn", "host=127.0.0.1 dbname=floor")
    assert code == 2 and out == ""
    assert (
        err == "shoe-controller report: the report needs psycopg 3: pip install 'shoe-controller[archive]'\n"
    )


def test_coups_whose_shoe_start_is_not_archived_are_counted_but_not_tested(
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = [e for e in _dragon() if e["type"] != "shoe.started"]
    with fresh_archive("floor_noshoe") as d:
        archive(d, events)
        doc = _json(capsys, d, *SHIFTS)
        (row,) = doc["rows"]
        assert row["coups"]["settled"] == 2 and row["results"] is None and row["hold"] == {}
        assert row["untested"] == {"no shoe.started archived": 2} and row["tests"] == 0
        code, out, _ = _report(capsys, "--dsn", d, *SHIFTS)
        assert code == 0 and "not tested: no shoe.started archived: 2" in out


def test_csv_rows_say_whether_they_are_live_or_replayed(capsys: pytest.CaptureFixture[str]) -> None:
    """Every CSV row carries its source (``live`` or ``replay``): a replays
    report's rows, cut out of their file, are never taken for the floor's."""
    from controller.replay import mark_replayed

    with fresh_archive("floor_report_csv") as d:
        live = _dragon()
        replayed = list(mark_replayed(iter(_dragon()), "ab" * 16, "t02.shoelog"))
        assert archive(d, live + replayed) == 2 * len(live)
        day = ("--from", "2026-11-20", "--to", "2026-11-20")
        code, out, err = _report(capsys, "--dsn", d, "--csv", *day)
        assert code == 0, err
        rows = list(csv.DictReader(io.StringIO(out)))
        assert [(r["table"], r["source"], r["settled"]) for r in rows] == [("T02", "live", "2")]
        code, out, err = _report(capsys, "--dsn", d, "--csv", "--replays", *day)
        assert code == 0, err
        assert out.splitlines()[0].split(",")[:3] == ["table", "source", "start"]
        rows = list(csv.DictReader(io.StringIO(out)))
        assert [(r["table"], r["source"], r["settled"]) for r in rows] == [("T02", "replay", "2")]
