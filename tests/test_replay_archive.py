"""Replayed events in the archive, below the processes of
``tests/test_replay_apart.py``: ``parse`` checks the replay envelope at its
bounds, and ``Store`` (real PostgreSQL) keeps replayed events in the schema
``replays`` whatever ids, tables and seqs they share with live ones.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest

from controller.archive import partitions
from controller.archive.parse import Invalid, parse
from controller.events import dumps
from controller.replay import MAX_SOURCE_CHARS, mark_replayed, replay_event_id, replay_source
from tests.test_archive import MAX, NOW, card, conn, count, event, msg, result, store

__all__ = ["conn"]  # the fixture, used by name

RUN = "0123456789abcdef0123456789abcdef"
OTHER_RUN = "f" * 32


def replayed(ev: dict[str, Any], run: str = RUN, source: str = "sample-shoe.shoelog") -> dict[str, Any]:
    (out,) = mark_replayed(iter([ev]), run, source)
    return out


def parsed(ev: dict[str, Any]) -> Any:
    topic, payload = msg(ev)
    return parse(topic, payload, prefix="baccarat", max_bytes=MAX)


# --- the id ------------------------------------------------------------------------------

LIVE_ID = re.compile(r"[A-Za-z0-9_-]{1,32}/[^/]+/[0-9]+")


@pytest.mark.parametrize(
    ("table", "shoe", "seq"),
    [("T01", None, 1), ("replay", "S1", 7), ("T01", "20251122T082640Z", 2**63 - 1), ("a" * 32, "x.2", 1)],
)
def test_a_replay_id_is_never_of_the_live_form(table: str, shoe: str | None, seq: int) -> None:
    rid = replay_event_id(RUN, table, shoe, seq)
    assert rid == f"replay/{RUN}/{table}/{shoe or '-'}/{seq}"
    assert rid.count("/") == 4
    assert LIVE_ID.fullmatch(rid) is None  # a live id has two slashes, whatever its parts
    # even a table named "replay": its live ids have two slashes
    assert LIVE_ID.fullmatch(f"replay/{shoe or '-'}/{seq}") is not None


# --- parse: the envelope at its bounds -----------------------------------------------------


def test_parse_takes_a_replayed_event_and_says_its_run() -> None:
    ev = parsed(replayed(card(5)))
    assert ev.replay == RUN
    assert ev.event_id == f"replay/{RUN}/T01/S1/5"
    assert parsed(card(5)).replay is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e.update(replay="x"), "replay: expected `object`, got `str`"),
        (lambda e: e["replay"].update(extra=1), "replay: must be an object with run and source"),
        (lambda e: e["replay"].pop("source"), "replay.source: required, missing"),
        (
            lambda e: e["replay"].update(run=RUN.upper()),
            "replay.run: expected `str` matching regex '^[0-9a-f]{32}$'",
        ),
        (
            lambda e: e["replay"].update(run=RUN[:31]),
            "replay.run: expected `str` matching regex '^[0-9a-f]{32}$'",
        ),
        (lambda e: e["replay"].update(source=""), "replay.source: expected `str` of length >= 1, not ''"),
        (
            lambda e: e["replay"].update(source="s" * 256),
            "replay.source: expected `str` of length <= 255, not 'sss",
        ),
        # the id must be this event's, of the replay form, of this run
        (lambda e: e.update(event_id="T01/S1/5"), "is not replay/<run>/<table>/<shoe>/<seq>"),
        (lambda e: e.update(event_id=f"replay/{OTHER_RUN}/T01/S1/5"), "is not replay/<run>/<table>"),
        (lambda e: e.update(event_id=f"replay/{RUN}/T02/S1/5"), "is not replay/<run>/<table>"),
    ],
)
def test_parse_refuses_a_replay_envelope_out_of_its_bounds(change: Any, reason: str) -> None:
    ev = replayed(card(5))
    change(ev)
    with pytest.raises(Invalid, match=re.escape(reason)):
        parsed(ev)


def test_a_source_of_255_characters_is_taken() -> None:
    assert parsed(replayed(card(5), source="s" * 255)).replay == RUN


def test_a_live_event_with_a_replay_id_is_refused() -> None:
    with pytest.raises(Invalid, match=re.escape("is not <table>/<shoe>/<seq> of this event")):
        parsed({**card(5), "event_id": f"replay/{RUN}/T01/S1/5"})


def _correction(seq: int, supersedes: str) -> dict[str, Any]:
    r = result(seq, 1)
    fields = {k: v for k, v in r.items() if k not in ("demo", "corrections")}
    return {
        **fields,
        "type": "coup.corrected",
        "supersedes": supersedes,
        "changes": [{"position": "P1", "was": "8S", "card": "9S"}],
        "reason": "tape",
        "command_id": "ctl-1",
    }


def test_a_correction_supersedes_only_an_event_of_its_own_side() -> None:
    live = _correction(9, "T01/S1/4")
    assert parsed(live).typed[1]["supersedes"] == "T01/S1/4"
    mine = replayed(live)  # supersedes follows: replay/<run>/T01/S1/4
    assert mine["supersedes"] == f"replay/{RUN}/T01/S1/4"
    assert parsed(mine).typed[1]["supersedes"] == mine["supersedes"]
    with pytest.raises(Invalid, match="is a replayed event's id, not this table's"):
        parsed(_correction(9, f"replay/{RUN}/T01/S1/4"))
    with pytest.raises(Invalid, match="is not an event of this replay run"):
        parsed({**mine, "supersedes": "T01/S1/4"})
    with pytest.raises(Invalid, match="is not an event of this replay run"):
        parsed({**mine, "supersedes": f"replay/{OTHER_RUN}/T01/S1/4"})


# --- the store: apart, in the same batch or not ------------------------------------------------


def test_replayed_events_are_archived_apart_never_against_live_ones(conn: Any) -> None:
    s = store()
    live = [
        event(
            "device.status",
            1,
            shoe=None,
            state="online",
            code="HELLO",
            device={"model": "FAKE", "firmware": "1.0", "serial": "1"},
        ),
        card(2),
        result(3, 1),
    ]
    # the replay of the same table, shoe and seqs, in the same batch: no
    # duplicate, no conflict, each side where it belongs
    replays = [replayed(e) for e in live]
    r = s.write(conn, [msg(e) for e in live + replays])
    conn.commit()
    # counted apart: the live figures count the live events only
    assert r.counts["archived"] == 3 and r.counts["replay_archived"] == 3, r.counts
    assert r.counts["conflicts"] == r.counts["duplicates"] == 0
    assert r.counts["replay_conflicts"] == r.counts["replay_duplicates"] == 0
    assert r.counts["rejects"] == 0, r.reject_reasons
    assert [row[0] for row in conn.execute("SELECT event_id FROM event_ids ORDER BY 1")] == [
        "T01/-/1", "T01/S1/2", "T01/S1/3"
    ]  # fmt: skip
    assert [row[0] for row in conn.execute("SELECT event_id FROM replays.event_ids ORDER BY 1")] == [
        f"replay/{RUN}/T01/-/1", f"replay/{RUN}/T01/S1/2", f"replay/{RUN}/T01/S1/3"
    ]  # fmt: skip
    for table in ("events", "coups", "device_status"):
        assert count(conn, table) == count(conn, f"replays.{table}") > 0
    assert count(conn, "events WHERE payload ? 'replay'") == 0
    assert count(conn, "replays.events WHERE NOT payload ? 'replay'") == 0

    # again: duplicates on each side; a replay of the same ids with other
    # content is a conflict among replays, never against the live events
    again = s.write(conn, [msg(e) for e in live + replays])
    conn.commit()
    assert again.counts["duplicates"] == 3 and again.counts["replay_duplicates"] == 3
    assert again.counts["archived"] == again.counts["replay_archived"] == 0
    other = replayed(card(2, code="KH"))
    clash = s.write(conn, [msg(other)])
    conn.commit()
    assert clash.counts["replay_conflicts"] == 1 and clash.counts["conflicts"] == 0
    assert count(conn, "conflicts") == 0
    assert count(conn, "replays.conflicts") == 1
    # a second run of the same capture is its own: new ids, archived
    second = s.write(conn, [msg(replayed(e, OTHER_RUN)) for e in live])
    conn.commit()
    assert second.counts["replay_archived"] == 3 and second.counts["archived"] == 0
    assert count(conn, "event_ids") == 3


def test_replayed_shoes_are_apart_and_retention_deletes_old_replays(conn: Any) -> None:
    old = NOW - dt.timedelta(days=400)
    started = event("shoe.started", 1, ts=old, decks=8, profile="punto_banco", shuffle_commit=None)
    s = store(retention=24)
    r = s.write(conn, [msg(replayed(started)), msg(replayed(result(2, 1)))])
    conn.commit()
    assert r.counts["replay_archived"] == 2, r.reject_reasons
    assert count(conn, "shoes") == 0
    assert count(conn, "replays.shoes") == 1
    # a year on, with 12 months kept: the old replay goes, the recent one stays
    partitions.drop_expired(conn, NOW, 12)
    conn.commit()
    assert count(conn, "replays.shoes") == 0
    assert count(conn, "replays.events") == 1
    assert count(conn, "replays.event_ids") == 1
    assert count(conn, "replays.coups") == 1


def test_a_replayed_event_as_published_is_what_parse_stores() -> None:
    """The marked dict, written as the replay writes it (``dumps``), parses
    with its mark and its canonical form keeps it."""
    ev = replayed(card(5))
    topic, payload = msg(ev)
    assert payload == dumps(ev).encode()
    got = parse(topic, payload, prefix="baccarat", max_bytes=MAX)
    assert json.loads(got.canonical)["replay"] == {"run": RUN, "source": "sample-shoe.shoelog"}


def test_a_capture_of_any_name_gives_a_source_the_archive_takes() -> None:
    """A file name is outside text: a control character, or bytes that are
    not UTF-8 (a lone surrogate once decoded), would make the event one the
    archive refuses; it is written as its escape and cut at the bound."""
    hostile = "shoe\n\x1b[2J" + b"\xff".decode("utf-8", "surrogateescape") + ".shoelog"
    source = replay_source(f"/captures/{hostile}")
    assert source == "shoe\\n\\x1b[2J\\udcff.shoelog"
    assert parsed(replayed(card(5), source=source)).replay == RUN
    assert replay_source("x" * 300) == "x" * MAX_SOURCE_CHARS == replay_source("x" * MAX_SOURCE_CHARS)


def test_the_durable_counters_and_stats_count_replays_apart(conn: Any, pg_dsn: str, capsys: Any) -> None:
    """``archive_counters`` (what ``--stats`` and the metrics show) never
    adds a replayed event to the live ``archived``, ``duplicates`` or
    ``conflicts``; ``--stats`` counts the replays' events apart."""
    from controller.archive.metrics import ArchiveMetrics
    from controller.archive.store import counters

    s = store()
    live = [card(2), result(3, 1)]
    s.write(conn, [msg(e) for e in live] + [msg(replayed(e)) for e in [*live, card(4)]])
    s.write(conn, [msg(replayed(card(2)))])  # a replay's duplicate
    s.write(conn, [msg(replayed(card(2, code="KH")))])  # a replay's conflict
    conn.commit()
    got = counters(conn)["test"]
    assert got["archived"] == 2 and got["replay_archived"] == 3, got
    assert got["replay_duplicates"] == 1 and got["replay_conflicts"] == 1, got
    assert "duplicates" not in got and "conflicts" not in got, got
    # the metrics name them apart too (one outcome each, present at 0)
    m = ArchiveMetrics(("127.0.0.1", 0))
    try:
        from collections import Counter

        m.committed(Counter(got))
        from prometheus_client import generate_latest

        text = generate_latest(m.registry).decode()
    finally:
        m.server.close()
    assert 'shoe_controller_archive_messages_total{outcome="archived"} 2.0' in text
    assert 'shoe_controller_archive_messages_total{outcome="replay_archived"} 3.0' in text
    assert 'shoe_controller_archive_messages_total{outcome="conflicts"} 0.0' in text
    assert 'shoe_controller_archive_messages_total{outcome="replay_conflicts"} 1.0' in text
    # archive --stats: the live events and conflicts, and the replays' apart
    from controller.commands.archive import _stats

    capsys.readouterr()
    assert _stats(pg_dsn) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["events"], stats["conflicts"]) == (2, 0), stats
    assert (stats["replay_events"], stats["replay_conflicts"]) == (3, 1), stats
    assert stats["counters"]["test"]["replay_archived"] == 3
