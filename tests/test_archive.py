"""The archive's store, schema and config against the real PostgreSQL
(a database of each test's own, tests/support/postgres.py): duplicates,
conflicts, bad payloads at their bounds, migrations applied twice and
concurrently, partitions and retention, and the command line's errors."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from controller.archive import db, migrate, partitions
from controller.archive.parse import Invalid, classify, parse
from controller.archive.store import BatchMark, BatchResult, Store, counters
from controller.events import dumps, format_ts
from tests.support import postgres

NOW = dt.datetime.now(dt.UTC)
MAX = 4096


def event(
    etype: str,
    seq: int,
    *,
    table: str = "T01",
    shoe: str | None = "S1",
    ts: dt.datetime = NOW,
    **payload: Any,
) -> dict[str, Any]:
    return {
        "v": 1,
        "type": etype,
        "event_id": f"{table}/{shoe or '-'}/{seq}",
        "table": table,
        "shoe": shoe,
        "seq": seq,
        "ts": format_ts(ts.timestamp()),
        **payload,
    }


def msg(ev: dict[str, Any]) -> tuple[str, bytes]:
    return f"baccarat/{ev['table']}/{ev['type'].replace('.', '/')}", dumps(ev).encode()


def result(seq: int, coup: int, **over: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "coup": coup,
        "demo": False,
        "player": {"cards": ["9S", "KH"], "total": 9},
        "banker": {"cards": ["2C", "3D"], "total": 5},
        "winner": "player",
        "natural": True,
        "player_pair": False,
        "banker_pair": False,
        "tags": [],
        "settlement": {"player": 1, "banker": -1, "tie": -1},
        "corrections": [],
    }
    payload.update(over)
    return event("coup.result", seq, **payload)


def card(seq: int, coup: int = 1, code: str = "9S") -> dict[str, Any]:
    return event("card", seq, coup=coup, position="P1", card=code, value=9, face_up=False)


@pytest.fixture
def conn(pg_dsn: str) -> Any:
    with db.connect(pg_dsn, autocommit=True) as c:
        migrate.apply(c)
    c = db.connect(pg_dsn)
    yield c
    c.close()


def store(now: dt.datetime = NOW, retention: int = 24) -> Store:
    return Store(
        archiver="test", prefix="baccarat", max_payload_bytes=MAX, retention_months=retention,
        partitions_ahead=2, now=lambda: now,
    )  # fmt: skip


def count(conn: Any, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# --- idempotency ----------------------------------------------------------------


def test_a_duplicate_delivery_changes_nothing(conn: Any) -> None:
    s = store()
    batch = [msg(card(1)), msg(card(2)), msg(result(3, 1))]
    first = s.write(conn, batch)
    assert first.counts["archived"] == 3 and first.counts["duplicates"] == 0
    before = conn.execute("SELECT event_id, payload, received_at FROM events ORDER BY event_id").fetchall()
    again = s.write(conn, [*batch, msg(card(2))])  # and a second copy inside one batch
    assert again.counts["archived"] == 0 and again.counts["duplicates"] == 4
    assert (
        conn.execute("SELECT event_id, payload, received_at FROM events ORDER BY event_id").fetchall()
        == before
    )
    assert count(conn, "coups") == 1 and count(conn, "event_ids") == 3 and count(conn, "conflicts") == 0
    assert counters(conn)["test"] == {"received": 7, "archived": 3, "duplicates": 4}


def test_the_same_id_with_other_content_is_kept_aside_never_overwritten(conn: Any) -> None:
    s = store()
    s.write(conn, [msg(result(3, 1))])
    forged = result(3, 1, winner="banker", settlement={"player": -1, "banker": 0.95, "tie": -1})
    out = s.write(conn, [msg(forged)])
    assert out.counts["conflicts"] == 1 and out.counts["archived"] == 0
    assert [c.event_id for c in out.conflicts] == ["T01/S1/3"]
    # the archive still holds the first content, in every table
    assert conn.execute("SELECT winner FROM coups").fetchall() == [("player",)]
    assert conn.execute("SELECT payload->>'winner' FROM events").fetchall() == [("player",)]
    row = conn.execute(
        "SELECT stored_payload->>'winner', new_payload->>'winner', stored_digest <> new_digest, archiver "
        "FROM conflicts"
    ).fetchall()
    assert row == [("player", "banker", True, "test")]
    assert counters(conn)["test"]["conflicts"] == 1
    # a conflict between two copies inside one batch: the first is stored
    out = s.write(conn, [msg(card(9, code="2C")), msg(card(9, code="3C"))])
    assert out.counts["archived"] == 1 and out.counts["conflicts"] == 1
    assert conn.execute("SELECT payload->>'card' FROM events WHERE event_id = 'T01/S1/9'").fetchall() == [
        ("2C",)
    ]
    assert count(conn, "conflicts") == 2


def test_key_order_and_spacing_are_not_a_conflict(conn: Any) -> None:
    s = store()
    ev = result(3, 1)
    s.write(conn, [msg(ev)])
    reordered = json.dumps(dict(reversed(list(ev.items()))), indent=2).encode()
    out = s.write(conn, [(msg(ev)[0], reordered)])
    assert out.counts["duplicates"] == 1 and out.counts["conflicts"] == 0


# --- bad payloads -----------------------------------------------------------------


def _sized(size: int) -> bytes:
    """A valid misdeal event of exactly ``size`` bytes."""
    ev = event("misdeal", 5, coup=1, code="UNREAD_CARD", detail="", action="void", deadline=None)
    pad = size - len(dumps(ev).encode())
    assert pad >= 0
    ev["detail"] = "x" * pad
    raw = dumps(ev).encode()
    assert len(raw) == size
    return raw


def test_payload_bound_and_bad_payloads_are_kept_aside(conn: Any) -> None:
    s = store()
    topic = "baccarat/T01/misdeal"
    at_bound = s.write(conn, [(topic, _sized(MAX))])
    assert at_bound.counts["archived"] == 1
    bad: list[tuple[str, bytes]] = [
        (topic, _sized(MAX + 1)),  # one byte over the bound
        ("baccarat/T01/card", b"{not json"),
        ("baccarat/T01/card", b"\xff\xfe"),
        ("baccarat/T01/card", b"[1, 2]"),
        ("baccarat/T01/card", b'{"v": NaN}'),
        ("baccarat/T01/card", b"[" * 2000 + b"]" * 2000),  # within the byte bound, nested too deep
        msg(result(7, 1, winner="nobody")),
        msg(result(8, 1, player={"cards": ["9S", "KH"], "total": 10})),
        msg({**result(9, 1), "coup": "1"}),
        msg(event("card", 10, card="A\u0000")),
        ("baccarat/T02/card", dumps(card(11)).encode()),  # on another table's topic
        msg({**card(12), "event_id": "T01/S1/999"}),  # id not table/shoe/seq
        msg({**card(13), "ts": "yesterday"}),
        msg({**card(14), "v": 2}),
    ]
    out = s.write(conn, bad)
    assert out.counts["rejects"] == len(bad) and out.counts["archived"] == 0
    rows = conn.execute("SELECT reason, size, length(payload) FROM rejects ORDER BY id").fetchall()
    assert len(rows) == len(bad)
    assert rows[0][0].startswith("oversized: 4097 bytes") and rows[0][1] == MAX + 1 and rows[0][2] == MAX
    reasons = " | ".join(r[0] for r in rows)
    needles = ["not JSON", "nested too deeply", "not UTF-8", "not an object", "winner:", "player.total:"]
    needles += ["coup:", "NUL", "belongs on baccarat/T01/card", "event_id:", "ts:", "v:"]
    for needle in needles:
        assert needle in reasons, needle
    assert counters(conn)["test"]["rejects"] == len(bad)


def test_non_event_topics_are_ignored() -> None:
    for topic in ("baccarat/T01/status", "baccarat/T01/shoe/state", "baccarat/T01/odds", "baccarat/T01/cmd",
                  "baccarat/T01/cmd/reply", "baccarat/T01", "other/T01/card"):  # fmt: skip
        assert classify(topic, "baccarat") is None, topic
    for topic in (
        "baccarat/T01/card",
        "baccarat/T01/roads",
        "baccarat/T01/odds/update",
        "baccarat/T01/shoe/started",
    ):
        assert classify(topic, "baccarat") == "T01"


def test_parse_checks_the_envelope_bounds() -> None:
    ok = card(1)
    assert parse(*msg(ok), prefix="baccarat", max_bytes=MAX).event_id == "T01/S1/1"
    with pytest.raises(Invalid, match="seq"):
        parse(*msg({**ok, "seq": 2**63, "event_id": f"T01/S1/{2**63}"}), prefix="baccarat", max_bytes=MAX)
    with pytest.raises(Invalid, match="table: expected `str` matching regex"):
        parse("baccarat/T 1/card", dumps({**ok, "table": "T 1"}).encode(), prefix="baccarat", max_bytes=MAX)
    with pytest.raises(Invalid, match=r"event_id: .*, not 'T 1/S1/1'"):  # its id, first, holds the table
        parse("baccarat/T 1/card", dumps({**ok, "table": "T 1", "event_id": "T 1/S1/1"}).encode(),
              prefix="baccarat", max_bytes=MAX)  # fmt: skip
    with pytest.raises(Invalid, match="shoe"):
        long = "S" * 65
        parse(*msg({**ok, "shoe": long, "event_id": f"T01/{long}/1"}), prefix="baccarat", max_bytes=MAX)


def test_a_row_the_database_refuses_is_kept_aside_and_the_rest_archived(conn: Any) -> None:
    s = store()
    with conn.transaction():
        conn.execute("ALTER TABLE misdeals ADD CONSTRAINT poison CHECK (code <> 'POISON')")
    poison = event("misdeal", 4, coup=1, code="POISON", detail="", action="void", deadline=None)
    out = s.write(conn, [msg(card(1)), msg(poison), msg(card(2))])
    assert out.counts["archived"] == 2 and out.counts["rejects"] == 1
    assert conn.execute("SELECT event_id FROM event_ids ORDER BY 1").fetchall() == [
        ("T01/S1/1",),
        ("T01/S1/2",),
    ]
    (reason,) = conn.execute("SELECT reason FROM rejects").fetchone()
    assert reason.startswith("database refused it:") and "poison" in reason


# --- a COMMIT whose reply was lost: the retry counts nothing twice ---------------------


def _lost_reply_after(s: Store, parts: set[int]) -> list[int]:
    """Make ``s`` lose the reply of the COMMITs of these parts: the
    transaction commits, then the caller sees a connection error, as when
    the network drops at that moment. Returns the parts attempted."""
    attempted: list[int] = []
    real = s._write

    def write(conn: Any, messages: Any, part: Any = None, **kw: Any) -> BatchResult:
        out = real(conn, messages, part, **kw)
        attempted.append(part[1])
        if part[1] in parts:
            parts.discard(part[1])
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return out

    s._write = write  # type: ignore[method-assign]
    return attempted


def test_a_batch_retried_after_its_commit_reply_was_lost_is_counted_once(conn: Any) -> None:
    s = store()
    batch = [msg(card(1)), msg(card(2)), ("baccarat/T01/status", b"{}"), ("baccarat/T01/card", b"junk")]
    mark = BatchMark()
    _lost_reply_after(s, {0})
    with pytest.raises(psycopg.OperationalError):
        s.write(conn, batch, mark)
    exact = {"received": 4, "archived": 2, "ignored": 1, "rejects": 1}
    assert counters(conn)["test"] == exact  # committed, though the caller could not know
    again = s.write(conn, batch, BatchMark(mark.batch, retry=True))
    assert again.already_committed and sum(again.counts.values()) == 0
    assert counters(conn)["test"] == exact
    assert count(conn, "rejects") == 1 and count(conn, "events") == 2
    # Not vacuous: without the mark, the same messages count again (as
    # received, duplicates, ignored) and the junk is kept aside twice.
    other = s.write(conn, batch, BatchMark(retry=True))
    assert not other.already_committed and other.counts["duplicates"] == 2
    assert counters(conn)["test"]["received"] == 8 and count(conn, "rejects") == 2


def test_a_first_attempt_is_never_taken_for_a_retry(conn: Any) -> None:
    """A new batch writes even when its id were (impossibly) marked: only a
    retry looks; and each committed batch moves the archiver's one mark."""
    s = store()
    first, second = BatchMark(), BatchMark()
    s.write(conn, [msg(card(1))], first)
    s.write(conn, [msg(card(2))], second)
    assert conn.execute("SELECT archiver, batch, part FROM archive_batch_marks").fetchall() == [
        ("test", second.batch, 0)
    ]
    assert s.write(conn, [msg(card(3))], first).counts["archived"] == 1  # retry=False: written
    assert counters(conn)["test"] == {"received": 3, "archived": 3}


def test_a_refused_batch_written_one_by_one_resumes_after_the_last_message_committed(conn: Any) -> None:
    """The batch is refused (a row PostgreSQL will not take), so it goes
    message by message; the reply of the third message's COMMIT is lost.
    The retry writes only what is left: every counter exact, the poison
    kept aside once."""
    s = store()
    with conn.transaction():
        conn.execute("ALTER TABLE misdeals ADD CONSTRAINT poison CHECK (code <> 'POISON')")
    poison = event("misdeal", 4, coup=1, code="POISON", detail="", action="void", deadline=None)
    batch = [msg(card(1)), msg(poison), msg(card(2)), msg(card(3))]
    mark = BatchMark()
    attempted = _lost_reply_after(s, {3})
    with pytest.raises(psycopg.OperationalError):
        s.write(conn, batch, mark)
    # the whole batch (part 0) refused; card 1 (part 1) in; the poison
    # (part 2) refused, kept aside; card 2 (part 3) in, its reply lost
    assert attempted == [1, 3]
    out = s.write(conn, batch, BatchMark(mark.batch, retry=True))
    assert attempted == [1, 3, 4] and not out.already_committed  # only card 3 is left
    assert +out.counts == {"received": 1, "archived": 1}  # (+: without the zero counts)
    assert counters(conn)["test"] == {"received": 4, "archived": 3, "rejects": 1}
    assert count(conn, "rejects") == 1 and count(conn, "event_ids") == 3
    done = s.write(conn, batch, BatchMark(mark.batch, retry=True))  # and once more: all of it is in
    assert done.already_committed and counters(conn)["test"]["received"] == 4


def test_the_archiver_retries_a_batch_whose_commit_reply_was_lost_and_counts_it_once(
    tmp_path: Path, pg_dsn: str
) -> None:
    """The service's side: the connection drops as the COMMIT succeeds; the
    archiver reconnects, retries the same batch, learns it is in, and
    acknowledges it with nothing written or counted twice."""
    from controller.archive.config import load_archive_config
    from controller.archive.service import Archiver, _Msg
    from tests.support.archiver import write_archive_config

    with db.connect(pg_dsn, autocommit=True) as c:
        migrate.apply(c)
    cfg = load_archive_config(write_archive_config(tmp_path, host="127.0.0.1", port=1, dsn=pg_dsn))
    archiver = Archiver(cfg, threading.Event())
    real = archiver.store._write
    calls: list[bool] = []

    def write(conn: Any, messages: Any, part: Any = None, **kw: Any) -> BatchResult:
        out = real(conn, messages, part, **kw)
        calls.append(True)
        if len(calls) == 1:  # committed; then the connection goes
            conn.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return out

    archiver.store._write = write  # type: ignore[method-assign]
    batch = [_Msg(*msg(card(seq)), mid=seq, qos=1, conn=1) for seq in (1, 2, 3)]
    try:
        out = archiver._commit(batch)
    finally:
        archiver._drop_database()
    assert out is not None and out.already_committed and len(calls) == 1  # the retry wrote nothing
    with db.connect(pg_dsn) as c:
        assert counters(c)["archive-test"] == {"received": 3, "archived": 3}
        assert count(c, "events") == 3


# --- typed rows ---------------------------------------------------------------------


def test_typed_rows(conn: Any) -> None:
    s = store()
    batch = [
        event("shoe.started", 1, decks=8, profile="punto_banco", shuffle_commit=None),
        event(
            "device.status",
            2,
            state="online",
            code="HELLO",
            device={"model": "fake", "firmware": "1", "serial": "x"},
        ),
        result(3, 1, tags=["banker7"], corrections=["EXTRA_CARD"]),
        event("coup.void", 4, coup=2, code="UNREAD_CARD", article="X", cards=[]),
        event(
            "misdeal",
            5,
            coup=3,
            code="UNREAD_CARD",
            detail="P1 entered by supervisor: 7H",
            action="corrected",
            deadline=None,
        ),
        event(
            "misdeal",
            6,
            coup=4,
            code="UNREAD_CARD",
            detail="card unread",
            action="awaiting_supervisor",
            deadline=format_ts(NOW.timestamp() + 120),
        ),
        event(
            "security.alert",
            7,
            code="COUP_NUMBERING_RESTORED",
            detail="the supervisor numbers the next coup 5",
            coup=5,
        ),
        event("shoe.ended", 8, coups=4, cards_dealt=20, tally={"player": 1, "banker": 0, "tie": 0}),
    ]
    out = s.write(conn, [msg(e) for e in batch])
    assert out.counts["archived"] == len(batch)
    assert conn.execute(
        "SELECT coup, void, void_code, winner, player_cards, player_total, tags, corrections, "
        "settlement->>'player' FROM coups ORDER BY coup"
    ).fetchall() == [
        (1, False, None, "player", ["9S", "KH"], 9, ["banker7"], ["EXTRA_CARD"], "1"),
        (2, True, "UNREAD_CARD", None, None, None, [], [], None),
    ]
    assert conn.execute(
        "SELECT decks, profile, coups, tally_player, ended_at IS NOT NULL FROM shoes"
    ).fetchall() == [(8, "punto_banco", 4, 1, True)]
    assert conn.execute("SELECT kind, code FROM supervisor_interventions ORDER BY seq").fetchall() == [
        ("misdeal", "UNREAD_CARD"), ("security.alert", "COUP_NUMBERING_RESTORED")
    ]  # fmt: skip
    assert conn.execute("SELECT state, device->>'model' FROM device_status").fetchall() == [
        ("online", "fake")
    ]
    assert count(conn, "misdeals") == 2 and count(conn, "events") == len(batch)


# --- migrations, partitions, retention ----------------------------------------------


def test_migrations_applied_twice_and_concurrently_run_once(pg_dsn: str) -> None:
    errors: list[BaseException] = []
    applied: list[int] = []

    def apply() -> None:
        try:
            with db.connect(pg_dsn, autocommit=True) as c:
                applied.extend(m.version for m in migrate.apply(c))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=apply) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    shipped = [m.version for m in migrate.migrations()]
    assert sorted(applied) == shipped  # each applied by exactly one of the three
    with db.connect(pg_dsn, autocommit=True) as c:
        assert migrate.apply(c) == []
        assert migrate.applied(c) == shipped and migrate.check_current(c) is None


def test_an_old_schema_is_refused_with_what_to_run(pg_dsn: str) -> None:
    with db.connect(pg_dsn) as c:
        problem = migrate.check_current(c)
    assert problem is not None and "--migrate" in problem


def test_partitions_ahead_and_retention_drops_a_partition(conn: Any) -> None:
    then = dt.datetime(2024, 1, 15, tzinfo=dt.UTC)
    old = store(now=then, retention=2)
    old.maintain(conn)  # 2024-01 .. 2024-03 made, nothing to drop
    assert sorted(partitions.existing(conn, "coups")) == [dt.date(2024, m, 1) for m in (1, 2, 3)]
    out = old.write(conn, [msg(result(1, 1, ts=then)), msg(result(2, 2, ts=then + dt.timedelta(days=31)))])
    assert out.counts["archived"] == 2
    # an event older than retention is kept aside, not given a partition
    out = old.write(conn, [msg(result(3, 3, ts=dt.datetime(2023, 10, 1, tzinfo=dt.UTC)))])
    assert out.counts["rejects"] == 1 and "outside the archive's window" in out.reject_reasons[0]
    assert dt.date(2023, 10, 1) not in partitions.existing(conn, "coups")
    # three months on, with two months' retention: January goes, February stays
    later = store(now=dt.datetime(2024, 4, 2, tzinfo=dt.UTC), retention=2)
    made, dropped = later.maintain(conn)
    assert sorted(dropped) == sorted(f"{p}_p202401" for p in partitions.PARTITIONED)
    assert made == 3 * len(partitions.PARTITIONED)  # April, May and June
    assert conn.execute("SELECT event_id FROM coups").fetchall() == [("T01/S1/2",)]
    assert conn.execute("SELECT event_id FROM event_ids").fetchall() == [("T01/S1/2",)]
    assert later.maintain(conn) == (0, [])


# --- the command line ---------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "archive", *args], capture_output=True, text=True, timeout=60
    )


def _write_cfg(tmp_path: Path, dsn: str, **over: Any) -> Path:
    cfg: dict[str, Any] = {
        "broker": {"host": "127.0.0.1", "port": 1, "client_id": "archive-test"},
        "dsn": dsn,
        **over,
    }
    path = tmp_path / "archive.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_migrate_twice_and_stats(tmp_path: Path, pg_dsn: str) -> None:
    cfg = _write_cfg(tmp_path, dsn=pg_dsn)
    first = _cli("--config", str(cfg), "--migrate")
    assert first.returncode == 0, first.stderr
    assert "applied: 0001_schema" in first.stdout
    second = _cli("--config", str(cfg), "--migrate")
    assert second.returncode == 0 and "already current" in second.stdout
    stats = _cli("--config", str(cfg), "--stats")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout) == {
        "conflicts": 0, "counters": {}, "events": 0, "rejects": 0, "replay_events": 0, "replay_conflicts": 0
    }  # fmt: skip


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"batch_size": 10}, "batch_size: unknown key"),
        ({"batch_max_events": 0}, "batch_max_events:"),
        ({"batch_max_events": 10_001}, "batch_max_events:"),
        ({"max_payload_bytes": 1023}, "max_payload_bytes:"),
        ({"retention_months": 0}, "retention_months:"),
        ({"share_group": "a/b"}, "share_group:"),
        ({"metrics": "nowhere"}, "metrics:"),
        ({"dsn": "host=x password=secret"}, "dsn: must not hold a password"),
        ({"broker": {"host": "h"}}, "broker.client_id: required key missing"),
        (
            {"broker": {"host": "h", "client_id": "a", "protocol": "3.1.1"}},
            "broker.protocol: the archiver needs MQTT 5",
        ),
        ({"broker": {"host": "h", "client_id": "a", "prot": 5}}, "broker.prot: unknown key"),
    ],
)
def test_cli_bad_config_names_the_key(tmp_path: Path, over: dict[str, Any], needle: str) -> None:
    cfg = _write_cfg(tmp_path, **{"dsn": "host=127.0.0.1", **over})
    out = _cli("--config", str(cfg), "--migrate")
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_without_postgres_says_so_in_one_line(tmp_path: Path) -> None:
    from tests.conftest import free_port

    cfg = _write_cfg(
        tmp_path, f"host=127.0.0.1 port={free_port()} user=postgres dbname=none connect_timeout=2"
    )
    out = _cli("--config", str(cfg), "--migrate")
    assert out.returncode == 1
    assert out.stderr.startswith("shoe-controller archive: cannot connect to PostgreSQL")
    assert len(out.stderr.strip().splitlines()) == 1
    # what make test says then, on this machine (PostgreSQL installed, so: start it)
    said = postgres.unavailable(f"host=127.0.0.1 port={free_port()}") or ""
    assert said.startswith("PostgreSQL is not reachable (") and "Connection refused" in said
    versions = postgres.installed_versions()
    start = f"'sudo pg_ctlcluster {versions[0]} main start'" if versions else ""
    advice = start or "'sudo apt-get install postgresql'"
    assert advice in said


def test_what_make_test_says_when_postgres_is_missing_stopped_or_refusing(tmp_path: Path) -> None:
    """The advice for each case, exact for Debian: not installed (apt-get),
    installed but stopped (pg_ctlcluster <its version> main start, or the
    service), answering but refusing (trust in pg_hba.conf)."""
    lib = tmp_path / "lib"
    for ver, server in (("13", True), ("15", True), ("16", False), ("common", False)):
        (lib / ver / "bin").mkdir(parents=True)
        if server:
            (lib / ver / "bin" / "postgres").write_text("")
    assert postgres.installed_versions(str(lib)) == ["15", "13"]  # a version without a server is not one
    assert postgres.installed_versions(str(tmp_path / "none")) == []
    refused = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused'
    missing = postgres.how_to(refused, [])
    assert "'sudo apt-get install postgresql'" in missing and "pg_ctlcluster" in missing
    stopped = postgres.how_to(refused, ["15", "13"])
    assert "PostgreSQL 15 is installed" in stopped and "'sudo pg_ctlcluster 15 main start'" in stopped
    assert "'sudo service postgresql start'" in stopped and "apt-get" not in stopped
    auth = postgres.how_to('failed: FATAL:  password authentication failed for user "postgres"', ["15"])
    assert "/etc/postgresql/15/main/pg_hba.conf" in auth and "127.0.0.1/32 trust" in auth


def test_make_deps_postgres_fails_with_the_advice_and_passes_here() -> None:
    """make test's gate: exit non-zero with one line on stderr naming what to
    do when the server is not there; pass on this machine, where it is."""
    from tests.conftest import free_port

    repo = Path(__file__).resolve().parent.parent
    nowhere = f"host=127.0.0.1 port={free_port()} user=postgres dbname=postgres"
    env = {**os.environ, "ARCHIVE_TEST_PG": nowhere}
    bad = subprocess.run(["make", "-s", "deps-postgres"], cwd=repo, env=env, capture_output=True, text=True)
    assert bad.returncode != 0
    (line,) = [s for s in bad.stderr.splitlines() if s.startswith("make test:")]
    assert "PostgreSQL is not reachable" in line and ("pg_ctlcluster" in line or "apt-get" in line)
    good = subprocess.run(
        ["make", "-s", "deps-postgres"],
        cwd=repo,
        env={k: v for k, v in os.environ.items() if k != "ARCHIVE_TEST_PG"},
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0, good.stderr


def test_cli_backfill_a_journal_twice(tmp_path: Path, pg_dsn: str) -> None:
    from controller.journal import Journal
    from controller.replay import ReplayOptions, replay_events

    capture = Path(__file__).parent / "captures" / "loss_second_result_released_late.shoelog"
    events = list(replay_events(capture, ReplayOptions(odds=True, roads=True)))
    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        j.append_events(events)
    cfg = _write_cfg(tmp_path, dsn=pg_dsn, retention_months=1200)  # the capture's ts are from 2025
    assert _cli("--config", str(cfg), "--migrate").returncode == 0
    first = _cli("--config", str(cfg), "--backfill", str(path))
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)[str(path)] == {
        "received": len(events), "archived": len(events), "duplicates": 0, "conflicts": 0, "rejects": 0,
    }  # fmt: skip
    again = _cli("--config", str(cfg), "--backfill", str(path))
    assert json.loads(again.stdout)[str(path)]["duplicates"] == len(events)
    with db.connect(pg_dsn) as c:
        assert count(c, "events") == len(events)
        assert count(c, "coups") == sum(e["type"] in ("coup.result", "coup.void") for e in events)
    missing = _cli("--config", str(cfg), "--backfill", str(tmp_path / "nope.sqlite3"))
    assert missing.returncode == 1 and "no such journal" in missing.stderr


# --- one contract: the event_types Structs read the events ---------------------------


def test_parse_reads_with_the_contract_strictly_and_ignores_what_a_newer_table_adds() -> None:
    """The archive decodes with ``controller.event_types``: a
    value of the wrong JSON type is refused (no coercion), a field a newer
    table adds is kept in the event and ignored, and an event of a type this
    version does not know is archived for its envelope."""
    newer = {**result(3, 1, player={"cards": ["9S", "KH"], "total": 9, "seen": 2}), "extra": {"x": 1e16}}
    ev = parse(*msg(newer), prefix="baccarat", max_bytes=MAX)
    assert ev.typed is not None and ev.typed[1]["player_total"] == 9
    assert ev.body["extra"] == {"x": 1e16} and '"extra":{"x":1e+16}' in ev.canonical  # json's float text
    unknown = event("table.opened", 4, by="pit boss", at=[1, 2.5])
    ev = parse("baccarat/T01/table/opened", dumps(unknown).encode(), prefix="baccarat", max_bytes=MAX)
    assert (ev.type, ev.typed, ev.body["by"]) == ("table.opened", None, "pit boss")
    for bad, reason in (
        ({"coup": "1"}, "coup: expected `int`, got `str`"),
        ({"demo": 0}, "demo: expected `bool`, got `int`"),
        ({"tags": ["banker8"]}, "tags[0]: invalid enum value 'banker8'"),
        ({"settlement": {"player": -2}}, "settlement[...]: expected `float` >= -1.0"),
    ):
        with pytest.raises(Invalid) as got:
            parse(*msg({**result(5, 1), **bad}), prefix="baccarat", max_bytes=MAX)
        assert str(got.value).startswith(reason), str(got.value)
    with pytest.raises(Invalid, match=r"^type: not an event type: 'Table\.Opened'"):
        parse("baccarat/T01/Table/Opened", dumps({**unknown, "type": "Table.Opened"}).encode(),
              prefix="baccarat", max_bytes=MAX)  # fmt: skip
