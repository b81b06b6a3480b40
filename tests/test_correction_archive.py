"""``coup.corrected`` in the floor archive and ``report``, against the real
PostgreSQL: stored in its typed table
(``coup_corrections``, migration 3) beside the raw event, refused by the
same strict checks as every type, and counted by ``report`` in place of the
result it supersedes, with the corrections listed apart."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller.archive.db import connect
from controller.archive.parse import Invalid, parse
from controller.cli import main
from tests.support.floor_events import archive, fresh_archive, topic_of
from tests.table import Table

UTC = dt.UTC


def _session() -> list[dict[str, Any]]:
    """T07, punto banco, 8 decks, 2026-11-20 10:00 UTC: coup 1 player (9 v
    5), coup 2 banker (6 v 7) corrected to a player natural (P1 6S -> 8D),
    coup 3 tie (7 v 7)."""
    t = Table("punto_banco", 8, table="T07")
    t.t = dt.datetime(2026, 11, 20, 10, 0, tzinfo=UTC).timestamp()
    t.start()
    t.cards("9S", "2C", "KH", "3D")
    t.result()
    t.cards("6S", "7C", "KD", "QD")
    t.result()
    t.cards("4S", "4C", "3S", "3C")
    t.result()
    reply, _ = t.command(cmd="correct", coup=2, cards={"P1": "8D"}, reason="tape: P1 was 8D", confirm=True)
    assert reply["ok"], reply
    return t.events


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    with fresh_archive("floor_corrections") as d:
        events = _session()
        assert archive(d, events) == len(events)
        yield d


def test_the_archive_stores_a_correction_in_its_typed_table(dsn: str) -> None:
    ev = next(e for e in _session() if e["type"] == "coup.corrected")
    with connect(dsn) as conn:
        rows = conn.execute(
            "SELECT coup, supersedes, player_cards, banker_cards, player_total, banker_total, winner,"
            ' "natural", player_pair, banker_pair, settlement, changes, reason, command_id'
            " FROM coup_corrections"
        ).fetchall()
        raw = conn.execute("SELECT payload FROM events WHERE type = 'coup.corrected'").fetchall()
        superseded = conn.execute(
            "SELECT winner FROM coups WHERE event_id = %s", (ev["supersedes"],)
        ).fetchall()
    assert rows == [
        (
            2,
            ev["supersedes"],
            ["8D", "KD"],
            ["7C", "QD"],
            8,
            7,
            "player",
            True,
            False,
            False,
            ev["settlement"],
            [{"position": "P1", "was": "6S", "card": "8D"}],
            "tape: P1 was 8D",
            "c1",
        )
    ]
    assert raw == [(ev,)]
    assert superseded == [("banker",)]  # kept as archived: the correction supersedes it


def _valid() -> dict[str, Any]:
    return next(e for e in _session() if e["type"] == "coup.corrected")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"settlement": None}, "settlement: expected `object`, got `null`"),
        ({"supersedes": "nope"}, "supersedes: expected `str` matching regex"),
        ({"supersedes": "T01/" + "S" * 65 + "/1"}, "supersedes: 'T01/SSS"),  # a shoe id past 64 characters
        ({"changes": []}, "changes: expected `array` of length >= 1, not []"),
        (
            {"changes": [{"position": "P9", "was": "6S", "card": "8D"}]},
            "changes[0].position: invalid enum value 'P9'",
        ),
        ({"changes": [{"position": "P1", "card": "8D"}]}, "changes[0].was: required, missing"),
        ({"reason": ""}, "reason: expected `str` of length >= 1, not ''"),
        ({"command_id": None}, "command_id: expected `int | str`, got `null`"),
        ({"command_id": 2**63}, "command_id: an integer of 19 digits, beyond a bigint"),
        ({"command_id": True}, "command_id: expected `int | str`, got `bool`"),
        ({"winner": "dragon"}, "winner: invalid enum value 'dragon'"),
        ({"player": {"cards": ["8D", "KD"], "total": 10}}, "player.total: expected `int` <= 9, not 10"),
        (
            {"settlement": {"player": 1, "banker": 1001}},
            "settlement.banker: must be a number -1..1000, not 1001",
        ),
    ],
)
def test_the_archive_refuses_a_malformed_correction_in_one_line(change: dict[str, Any], error: str) -> None:
    ev = _valid() | change
    with pytest.raises(Invalid) as got:
        parse(topic_of(ev), json.dumps(ev).encode(), prefix="baccarat", max_bytes=65536)
    assert str(got.value).startswith(error) and "\n" not in str(got.value), str(got.value)
    good = _valid()
    assert parse(topic_of(good), json.dumps(good).encode(), prefix="baccarat", max_bytes=65536).typed


def test_report_counts_the_corrected_result_and_lists_the_correction_apart(
    capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    args = ["report", "--dsn", dsn, "--from", "2026-11-20", "--to", "2026-11-20", "--table", "T07"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["rows"]
    # coup 2 counts as the Player win it was corrected to, once
    assert row["coups"]["settled"] == 3
    assert row["results"]["observed"] == {"banker": 0, "player": 2, "tie": 1}
    # a unit on Player every coup: +1 +1 +0 (the superseded result would give +1 -1 +0)
    assert row["hold"]["player"]["observed"] == pytest.approx(-2 / 3)
    assert row["hold"]["banker"]["observed"] == pytest.approx(2 / 3)
    ev = _valid()
    assert row["corrections"] == [
        {
            "shoe": ev["shoe"],
            "coup": 2,
            "at": "2026-11-20T10:00:20",
            "changes": [{"position": "P1", "was": "6S", "card": "8D"}],
            "was": "banker",
            "winner": "player",
            "reason": "tape: P1 was 8D",
            "command_id": "c1",
            "event_id": ev["event_id"],
            "supersedes": ev["supersedes"],
        }
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert (
        "Corrections of settled coups (1; counted above as corrected):\n"
        f"  T07 2026-11-20T10:00:20 shoe {ev['shoe']} coup 2: P1 6S->8D: banker -> player;"
        " reason: tape: P1 was 8D (command c1)\n"
    ) in text


def test_report_csv_counts_the_corrected_result_and_lists_each_correction_in_its_row(
    capsys: pytest.CaptureFixture[str], dsn: str
) -> None:
    assert main(["report", "--dsn", dsn, "--from", "2026-11-20", "--to", "2026-11-20", "--csv"]) == 0
    out = capsys.readouterr().out
    (row,) = list(csv.DictReader(io.StringIO(out)))
    # the row's results count coup 2 once, as the Player win it was corrected to
    assert (row["settled"], row["banker_observed"], row["player_observed"], row["tie_observed"]) == (
        "3",
        "0",
        "2",
        "1",
    )
    ev = _valid()
    assert row["corrections"] == "1"
    assert row["correction_list"] == (
        f"2026-11-20T10:00:20 shoe {ev['shoe']} coup 2: P1 6S->8D: banker -> player;"
        " reason: tape: P1 was 8D (command c1)"
    )


def test_report_csv_lists_two_corrections_of_a_period_in_order_and_shows_no_control_character(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # coup 2 corrected twice (the second supersedes the first: P1 8D -> 8H,
    # the same result); the second reason as a journal written before the
    # door closed could hold it
    events = _session()
    again = {**next(e for e in events if e["type"] == "coup.corrected")}
    again["player"] = {"cards": ["8H", "KD"], "total": 8}
    first_id = again["event_id"]
    seq = max(int(e["seq"]) for e in events) + 1
    again.update(
        seq=seq,
        event_id=first_id.rpartition("/")[0] + f"/{seq}",
        supersedes=first_id,
        ts="2026-11-20T10:05:00.000Z",
        changes=[{"position": "P1", "was": "8D", "card": "8H"}],
        reason="=cmd|' /C calc'!A0\x1b[2J",
        command_id="c2",
    )
    with fresh_archive("floor_corrections_csv") as d:
        assert archive(d, [*events, again]) == len(events) + 1
        assert main(["report", "--dsn", d, "--from", "2026-11-20", "--to", "2026-11-20", "--csv"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert row["corrections"] == "2"
    first, second = row["correction_list"].split(" | ")
    assert first.startswith("2026-11-20T10:00:20 shoe ") and first.endswith("(command c1)")
    assert second.endswith(": P1 8D->8H: player -> player; reason: =cmd|' /C calc'!A0\\x1b[2J (command c2)")
