"""Replayed events kept apart, end to end: a live daemon deals on T01, a
user replays ``docs/sample-shoe.shoelog`` with T01's own config. The replay
is refused (one line, exit 2); told explicitly (``--force-live-table``), it
is published with replay ids, the archiver keeps it apart (schema
``replays``), ``report`` counts only the live coups (``--replays`` the
replayed ones) and nothing lands in ``conflicts``: the replay's first
``device.status`` is ``replay/<run>/T01/-/1``, not the daemon's ``T01/-/1``.

Real processes throughout: the suite's mosquitto, the daemon (fake shoe),
the archiver, PostgreSQL, and the CLI as a user runs it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import BrokerFactory, Subscriber, eventually
from tests.support.archiver import BROKER_CONFIG, ArchiverProcess, migrate, write_archive_config
from tests.support.board import daemon_config, start_daemon, stop
from tests.support.floor_events import topic_of
from tests.test_cli_errors import cli, one_line_error

pytestmark = pytest.mark.mqtt

SAMPLE = Path(__file__).resolve().parent.parent / "docs" / "sample-shoe.shoelog"


def _one(dsn: str, sql: str, *args: Any) -> Any:
    with psycopg.connect(dsn) as c:
        row = c.execute(sql, args).fetchone()
        assert row is not None
        return row[0]


def _report(dsn: str, *args: str) -> dict[str, Any]:
    r = cli("report", "--dsn", dsn, "--json", "--table", "T01", *args)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _settled(rep: dict[str, Any]) -> int:
    return sum(int(t["coups"]["settled"]) for t in rep["totals"])


def _live_results(journal: Path) -> int:
    """The settled (non-demo) coups the daemon journalled."""
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT json FROM events WHERE type = 'coup.result'").fetchall()
    finally:
        db.close()
    return sum(1 for (text,) in rows if not json.loads(text)["demo"])


def test_a_replay_onto_a_live_table_is_refused_and_when_forced_is_kept_apart(
    tmp_path: Path,
    mosquitto: BrokerFactory,
    subscriber: Callable[..., Subscriber],
    pg_dsn: str,
) -> None:
    broker = mosquitto(config=BROKER_CONFIG)
    archive_cfg = write_archive_config(
        tmp_path, host=broker.host, port=broker.port, dsn=pg_dsn, batch_max_latency_ms=50
    )
    migrate(archive_cfg)
    archiver = ArchiverProcess(archive_cfg, tmp_path / "archiver.log")
    archiver.start()
    sub = subscriber(broker, ["baccarat/T01/status"])
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    t01 = daemon_config(live_dir, broker, cards_per_second=100)
    daemon = start_daemon(t01)
    try:
        assert sub.wait_for(lambda ms: any(m.payload == b"online" for m in ms), 30), "T01 never came online"
        assert eventually(
            lambda: _one(pg_dsn, "SELECT count(*) FROM coups WHERE table_id = 'T01'") >= 2, 60
        ), "the live coups were not archived"

        # the command, as a new user typed it: refused
        line = one_line_error(cli("replay", str(SAMPLE), "--out", "mqtt", "-c", str(t01)), 2)
        assert line.startswith("shoe-controller replay: table T01 has a controller online"), line
        assert "--force-live-table" in line

        # told explicitly: published, as replay run <run>
        r = cli("replay", str(SAMPLE), "--out", "mqtt", "-c", str(t01), "--force-live-table")
        assert r.returncode == 0, r.stderr
        m = re.search(r"replay: (\d+) events published to .* as replay run ([0-9a-f]{32}),", r.stderr)
        assert m is not None, r.stderr
        published, run = int(m.group(1)), m.group(2)
        assert published == 500
        assert eventually(lambda: _one(pg_dsn, "SELECT count(*) FROM replays.events") == published, 60), (
            "the replay was not archived"
        )
    finally:
        assert stop(daemon) == 0
    # the daemon has stopped: let the archive take what it published (what a
    # SIGTERM cut short stays in the journal, re-offered at its next start)
    journal = live_dir / "journal.sqlite3"
    jdb = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        journalled = {str(r[0]) for r in jdb.execute("SELECT event_id FROM events")}
    finally:
        jdb.close()
    eventually(lambda: _one(pg_dsn, "SELECT count(*) FROM events") == len(journalled), 20)
    archiver.stop()

    # the replay's first device.status has its own id; the daemon's T01/-/1 is the daemon's
    first = f"replay/{run}/T01/-/1"
    assert _one(pg_dsn, "SELECT payload->>'type' FROM replays.events WHERE event_id = %s", first) == (
        "device.status"
    )
    assert _one(pg_dsn, "SELECT payload->'replay' FROM events WHERE event_id = 'T01/-/1'") is None
    assert _one(pg_dsn, "SELECT count(*) FROM events WHERE payload ? 'replay'") == 0
    assert _one(pg_dsn, "SELECT count(*) FROM event_ids WHERE event_id LIKE 'replay/%%'") == 0
    assert _one(pg_dsn, "SELECT count(*) FROM conflicts") == 0
    assert _one(pg_dsn, "SELECT count(*) FROM replays.conflicts") == 0
    assert _one(pg_dsn, "SELECT count(*) FROM rejects") == 0
    # the live table signs (the default) and the replay, with the very same
    # config, signs nothing: no table's signature on a replayed event
    assert _one(pg_dsn, "SELECT count(*) FROM events WHERE NOT payload ? 'sig'") == 0
    assert (
        _one(pg_dsn, "SELECT count(*) FROM replays.events WHERE payload ?| array['sig', 'key_id', 'prev']")
        == 0
    )
    # the recorded 2025 shoe is not one of T01's live shoes
    assert _one(pg_dsn, "SELECT count(*) FROM shoes WHERE started_at < '2026-01-01'") == 0
    assert _one(pg_dsn, "SELECT count(*) FROM replays.shoes WHERE table_id = 'T01'") == 1

    # every live event archived is one the daemon journalled, none a replay's
    with psycopg.connect(pg_dsn) as c:
        archived = {str(r[0]) for r in c.execute("SELECT event_id FROM events")}
    assert archived <= journalled and len(archived) > 0
    # report: only the live coups, exactly those archived, all of them the daemon's
    live = _report(pg_dsn)
    settled_live = _one(pg_dsn, "SELECT count(*) FROM coups WHERE NOT void AND NOT demo")
    assert _settled(live) == settled_live > 0
    assert settled_live <= _live_results(journal)
    # the replay's day has no live coups at all
    day = ("--from", "2025-11-22", "--to", "2025-11-22")
    assert _settled(_report(pg_dsn, *day)) == 0
    # asked for: the replayed shoe alone (the sample shoe's 82 settled coups)
    replays = _report(pg_dsn, "--replays", *day)
    assert replays["replays"] is True
    assert _settled(replays) == 82
    assert _settled(_report(pg_dsn, "--replays")) == 0  # no replay dealt today


def test_an_older_consumer_that_ignores_unknown_fields_reads_a_replay_as_before(tmp_path: Path) -> None:
    """The envelope addition is optional and additive: a consumer built on
    the v1 envelope as it was (its fields only, others ignored) and the
    board's state (a consumer in this repository) take a replayed stream
    exactly as the same stream unmarked."""
    import msgspec

    from controller.board.state import TableState
    from controller.events import dumps
    from controller.replay import ReplayOptions, mark_replayed, new_run, replay_events

    class OldEnvelope(msgspec.Struct):  # unknown fields ignored: msgspec's default
        v: int
        type: str
        event_id: str
        table: str
        shoe: str | None
        seq: int
        ts: str

    plain = list(replay_events(SAMPLE, ReplayOptions(roads=True)))
    marked = list(mark_replayed(iter(plain), new_run(), SAMPLE.name))
    decode = msgspec.json.Decoder(OldEnvelope).decode
    old = [decode(json.dumps(e)) for e in marked]
    assert [(o.v, o.type, o.table, o.shoe, o.seq, o.ts) for o in old] == [
        (e["v"], e["type"], e["table"], e["shoe"], e["seq"], e["ts"]) for e in plain
    ]
    # the payload is untouched: every field but the id and the mark
    for p, m in zip(plain, marked, strict=True):
        assert {k: v for k, v in m.items() if k not in ("event_id", "replay")} == {
            k: v for k, v in p.items() if k != "event_id"
        }

    def board_view(events: list[dict[str, Any]]) -> Any:
        state = TableState("T01")
        state.connected(True)
        for e in events:
            state.apply(topic_of(e), dumps(e).encode())
        return state.view()

    assert board_view(marked) == board_view(plain)


def test_the_board_shows_no_replay_on_a_table_whose_controller_is_online() -> None:
    """``--force-live-table`` publishes onto a live table's topics: the board
    (a consumer of those topics, no archive) keeps showing the table's own
    play, and counts what it left out; with no controller online (a demo
    board driven by a replay) the replay is shown as before."""
    from controller.board.state import TableState
    from controller.events import dumps
    from controller.replay import ReplayOptions, mark_replayed, new_run, replay_events

    live = list(replay_events(Path(__file__).parent / "captures" / "x_sequence_gap.shoelog", ReplayOptions()))
    plain = list(replay_events(SAMPLE, ReplayOptions(roads=True)))
    marked = list(mark_replayed(iter(plain), new_run(), SAMPLE.name))

    def board(status: str | None, *streams: list[dict[str, Any]]) -> TableState:
        state = TableState("T01")
        state.connected(True)
        if status is not None:
            state.apply("baccarat/T01/status", status.encode())
        for events in streams:
            for e in events:
                state.apply(topic_of(e), dumps(e).encode())
        return state

    online = board("online", live, marked)
    assert online.view() == {**board("online", live).view(), "version": online.view()["version"]}
    # every one the board reads (it shows no shoe.burn or security.alert)
    shown_types = {e["type"] for e in marked} - {"shoe.burn", "security.alert"}
    assert online.replays_ignored == sum(1 for e in marked if e["type"] in shown_types) > 500
    # no controller online: a replay drives the board as it always did
    for status in (None, "offline"):
        shown = board(status, marked)
        assert shown.replays_ignored == 0
        assert shown.view()["tally"]["coups"] == 82
        assert shown.view() == {**board(status, plain).view(), "version": shown.view()["version"]}
