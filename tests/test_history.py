"""Surveillance review: ``controller.history``
over real journals, the ``shoe-controller history`` command line and its
three output forms, and the shoe report (HTML, and PDF through the real
headless Chromium).

The scripted journal is written as the daemon writes it: every frame and
every supervisor command through a real engine, each input stored with
the events it caused in one ``Journal.append_input``; the engine's own
replies are kept, so the outcome ``history`` reads back from the events is
checked against the reply the daemon really sent."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.events import format_ts
from controller.history import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    HistoryError,
    NotEnded,
    NotFound,
    QueryError,
    Reader,
    parse_time,
)
from controller.history_html import report_page
from controller.journal import Journal
from firmware_protocols.frames import ShuffleCommit
from tests.table import T0, Table

SCRIPT = Path(sys.executable).with_name("shoe-controller")
HOSTILE = '<script>alert("x")</script>, "quoted"'
COMMIT = hashlib.sha256(b"shuffled order").hexdigest()


class JournalledTable(Table):
    """A ``Table`` whose every input goes to a real journal, as the daemon
    stores it: the input and the events it caused, in one transaction."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(table="T09")
        self.journal = journal
        self.replies: dict[str, dict[str, Any]] = {}

    def feed(self, frame: Any) -> list[dict[str, Any]]:
        out = super().feed(frame)
        self.journal.append_input(frame.t, "rx", repr(frame).encode(), out)
        return out

    def tick(self, dt: float) -> list[dict[str, Any]]:
        out = super().tick(dt)
        self.journal.append_input(self.t, "tick", b"", out)
        return out

    def command(self, **cmd: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        reply, out = super().command(**cmd)
        self.journal.append_input(self.t, "cmd", json.dumps(cmd, separators=(",", ":")).encode(), out)
        self.replies[str(cmd["id"])] = reply
        return reply, out

    def refused(self, cmd_id: str, error: str) -> None:
        """What the daemon journals for a command its gate refused."""
        self.command(id=cmd_id, cmd="_reject", error=error)


def build(path: Path) -> dict[str, Any]:
    """Shoe 1 (ended by the supervisor): a clean coup, an unread card
    entered by the supervisor after a refused attempt, a coup voided by the
    supervisor (with a hostile reason), a coup whose unread card was never
    entered (void at the deadline), a refused command, a clean coup. Shoe
    2: one coup, still in play."""
    with Journal(path) as j:
        tb = JournalledTable(j)
        tb.hello()
        tb.feed(ShuffleCommit(tb.t + 0.5, None, "S1", 416, COMMIT))
        tb.new_shoe()
        tb.cards("AS", "2C")  # burn: first card A, one burned
        tb.cards("6S", "7C", "KH", "QD")  # coup 1: Banker 7 v Player 6
        tb.result()
        tb.card(None)  # coup 2: P1 unread
        tb.cards("7C", "KH", "QD")
        tb.result()
        tb.command(id="bad-1", cmd="enter_card", coup=2, card="ZZ")
        tb.command(id="fix-1", cmd="enter_card", coup=2, card="6S")
        tb.cards("9H", "8D")  # coup 3 under way
        tb.command(id="void-1", cmd="void", coup=3, reason=HOSTILE)
        tb.result()  # the dealer clears the voided coup
        tb.card(None)  # coup 4: unread, never entered
        tb.tick(200.0)
        tb.cards("7C", "KH", "QD")
        tb.result()
        tb.refused("late-1", "command is 95 s old (freshness window 30 s)")
        tb.cards("6S", "7C", "KH", "QD")  # coup 5
        tb.result()
        tb.command(id="end-1", cmd="end_shoe")
        tb.t += 5
        tb.new_shoe()
        tb.cards("3D", "4C", "5H", "6C")  # burn: first card 3, three burned
        tb.cards("6S", "7C", "KH", "QD")
        tb.result()
        events = list(tb.events)
    shoes = [e["shoe"] for e in events if e["type"] == "shoe.started"]
    return {"path": path, "events": events, "replies": tb.replies, "shoes": shoes}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build(tmp_path_factory.mktemp("history") / "journal.sqlite3")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"the console script is not installed next to {sys.executable}"
    return subprocess.run(
        [str(SCRIPT), "history", *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def one_line_error(r: subprocess.CompletedProcess[str], code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


# --- the queries ----------------------------------------------------------------


def test_the_scripted_shoe_is_what_the_tests_below_assume(scripted: dict[str, Any]) -> None:
    r = scripted["replies"]
    assert r["bad-1"]["ok"] is False and r["fix-1"]["ok"] is True and r["void-1"]["ok"] is True
    assert r["end-1"]["ok"] is True and r["late-1"]["ok"] is False
    assert len(scripted["shoes"]) == 2


def test_shoes_lists_every_shoe_with_its_tally_and_state(scripted: dict[str, Any]) -> None:
    page = Reader(scripted["path"]).shoes()
    assert [r["shoe"] for r in page.rows] == scripted["shoes"]
    first, second = page.rows
    ended = next(e for e in scripted["events"] if e["type"] == "shoe.ended")
    assert first["status"] == "ended" and first["ended"] == ended["ts"]
    assert (first["banker"], first["player"], first["tie"]) == (3, 0, 0)
    assert first["void"] == 2 and first["settled"] == 3 and first["coups"] == ended["coups"] == 5
    assert second["status"] == "in play" and second["ended"] is None and second["settled"] == 1
    assert not page.truncated and page.limit == DEFAULT_LIMIT


def test_the_limit_keeps_the_newest_shoes_and_says_more_matched(scripted: dict[str, Any]) -> None:
    page = Reader(scripted["path"]).shoes(limit=1)
    assert [r["shoe"] for r in page.rows] == scripted["shoes"][1:] and page.truncated


@pytest.mark.parametrize("bad", [0, -1, MAX_LIMIT + 1, "many"])
def test_a_limit_out_of_bounds_is_a_one_line_usage_error(scripted: dict[str, Any], bad: Any) -> None:
    with pytest.raises(QueryError, match=r"^limit: .*1\.\.10000"):
        Reader(scripted["path"]).coups(scripted["shoes"][0], limit=bad)


def test_coups_of_a_shoe_are_every_coup_settled_void_or_corrected(scripted: dict[str, Any]) -> None:
    page = Reader(scripted["path"]).coups(scripted["shoes"][0])
    rows = {r["coup"]: r for r in page.rows}
    assert sorted(rows) == [1, 2, 3, 4, 5]
    assert rows[1]["status"] == "settled" and rows[1]["winner"] == "banker"
    assert rows[1]["player"] == ["6S", "KH"] and rows[1]["banker_total"] == 7
    assert rows[2]["status"] == "settled" and rows[2]["misdeals"] == ["UNREAD_CARD"]
    assert rows[3]["status"] == "void" and rows[3]["void_code"] == "SUPERVISOR_VOID"
    assert rows[4]["status"] == "void" and rows[4]["void_code"] == "UNREAD_CARD"
    assert Reader(scripted["path"]).coups(scripted["shoes"][0], limit=2).truncated


def test_coups_of_a_time_range_are_those_closed_in_it_until_excluded(scripted: dict[str, Any]) -> None:
    closing = [e for e in scripted["events"] if e["type"] in ("coup.result", "coup.void")]
    second, fourth = closing[1], closing[3]
    since, until = parse_time(second["ts"]), parse_time(fourth["ts"])
    page = Reader(scripted["path"]).coups(since=since, until=until)
    assert [(r["shoe"], r["coup"]) for r in page.rows] == [(e["shoe"], e["coup"]) for e in closing[1:3]]
    assert page.rows[0]["misdeals"] == ["UNREAD_CARD"], "a coup's misdeals come with it"
    everything = Reader(scripted["path"]).coups(since=T0 - 10)
    assert len(everything.rows) == len(closing)


def test_a_time_range_must_run_forwards(scripted: dict[str, Any]) -> None:
    with pytest.raises(QueryError, match=r"--until .* is not after --since"):
        Reader(scripted["path"]).coups(since=T0 + 10, until=T0)
    with pytest.raises(QueryError, match="give --shoe ID"):
        Reader(scripted["path"]).coups()


def test_one_coups_timeline_has_its_cards_misdeals_commands_and_settlement(scripted: dict[str, Any]) -> None:
    shoe = scripted["shoes"][0]
    tl = Reader(scripted["path"]).timeline(shoe, 2)
    kinds = [e["kind"] for e in tl["entries"]]
    assert kinds == [
        "card",  # P1 unread
        "misdeal",  # UNREAD_CARD awaiting
        "card",
        "card",
        "card",
        "command",  # bad-1, refused by the engine
        "command",  # fix-1
        "card",  # P1 entered
        "misdeal",  # corrected
        "result",
    ]
    first = tl["entries"][0]
    assert (first["position"], first["card"]) == ("P1", "unread")
    read = [e for e in scripted["events"] if e["type"] == "card" and e.get("coup") == 2]
    assert [c["ts"] for c in tl["cards"]] == [e["ts"] for e in read], "every card with its read time"
    entered = tl["entries"][7]["event"]
    assert entered["entered"] is True and entered["position"] == "P1" and entered["card"] == "6S"
    bad, fix = tl["commands"]
    assert (bad["id"], bad["cmd"], bad["args"]) == ("bad-1", "enter_card", {"card": "ZZ"})
    assert fix["id"] == "fix-1" and fix["ts"] == format_ts(fix["t"])
    # the outcome read from the journal agrees with the reply really sent
    assert fix["reply"]["ok"] is scripted["replies"]["fix-1"]["ok"] is True
    assert fix["reply"]["recorded"] is False and fix["reply"]["effects"]
    assert bad["reply"]["ok"] is None and scripted["replies"]["bad-1"]["ok"] is False
    assert tl["status"] == "settled" and tl["result"]["corrections"] == ["UNREAD_CARD"]
    misdeals = [(m["code"], m["action"]) for m in tl["misdeals"]]
    assert misdeals == [("UNREAD_CARD", "awaiting_supervisor"), ("UNREAD_CARD", "corrected")]


def test_a_voided_coups_timeline_ends_in_the_void_with_the_supervisors_command(
    scripted: dict[str, Any],
) -> None:
    tl = Reader(scripted["path"]).timeline(scripted["shoes"][0], 3)
    assert tl["status"] == "void" and tl["void"]["code"] == "SUPERVISOR_VOID"
    (cmd,) = tl["commands"]
    assert cmd["id"] == "void-1" and cmd["args"]["reason"] == HOSTILE
    assert cmd["reply"]["ok"] is True and tl["void"]["seq"] in cmd["reply"]["effects"]
    assert [e["kind"] for e in tl["entries"]][-3:] == ["command", "misdeal", "void"]
    deadline = Reader(scripted["path"]).timeline(scripted["shoes"][0], 4)
    assert deadline["void"]["code"] == "UNREAD_CARD" and deadline["commands"] == []


def test_unknown_shoe_coup_and_code_are_one_line_errors(scripted: dict[str, Any]) -> None:
    r = Reader(scripted["path"])
    shoe = scripted["shoes"][0]
    with pytest.raises(NotFound, match=r"^no shoe 'NOPE' in "):
        r.timeline("NOPE", 1)
    with pytest.raises(NotFound, match=r"has no coup 6 .*its coups are 1\.\.5"):
        r.timeline(shoe, 6)
    for bad in (0, 10_001, "x"):
        with pytest.raises(QueryError, match=r"^coup: "):
            r.timeline(shoe, bad)
    for bad_shoe in ("", "a/b", "x" * 65, "bad\nid"):
        with pytest.raises(QueryError, match=r"^shoe: "):
            r.timeline(bad_shoe, 1)
    with pytest.raises(QueryError, match=r"not a dealing error .* one of: EXTRA_CARD"):
        r.errors("NO_SUCH_CODE")
    with pytest.raises(QueryError, match="is not a dealing error code"):
        r.errors("unread card; drop table")


def test_errors_lists_each_coup_with_the_code_and_how_it_was_resolved(scripted: dict[str, Any]) -> None:
    r = Reader(scripted["path"])
    rows = r.errors("unread_card").rows
    assert [(x["coup"], x["first_action"]) for x in rows] == [
        (2, "awaiting_supervisor"),
        (4, "awaiting_supervisor"),
    ]
    assert (
        rows[0]["resolution"].startswith("corrected by supervisor")
        and rows[0]["outcome"] == "settled: banker"
    )
    assert rows[1]["resolution"].startswith("void") and rows[1]["outcome"] == "void (UNREAD_CARD)"
    (void,) = r.errors("SUPERVISOR_VOID").rows
    assert void["coup"] == 3 and HOSTILE in void["detail"]
    assert r.errors("FOREIGN_CARD").rows == [], "a known code with no coups is no error"
    assert [x["coup"] for x in r.errors("UNREAD_CARD", shoe=scripted["shoes"][1]).rows] == []


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2026-11-23T04:30:00Z", 1795408200.0),
        ("2026-11-23T05:30:00+01:00", 1795408200.0),
        ("2026-11-23 04:30", 1795408200.0),
        ("2026-11-23T04:30:00.250Z", 1795408200.25),
        ("2026-11-23", 1795392000.0),
        ("now", 2_000_000_000.0),
        ("15m", 2_000_000_000.0 - 900),
        ("2h", 2_000_000_000.0 - 7200),
        ("3d", 2_000_000_000.0 - 3 * 86400),
    ],
)
def test_times_are_iso_8601_utc_unless_zoned_or_a_time_ago(text: str, want: float) -> None:
    assert parse_time(text, now=2_000_000_000.0) == pytest.approx(want)


@pytest.mark.parametrize("bad", ["", "yesterday", "2026-13-01", "12x", "1" * 65, "2026-11-23T25:00Z"])
def test_a_time_that_is_no_time_is_a_one_line_usage_error(bad: str) -> None:
    with pytest.raises(QueryError) as exc:
        parse_time(bad, name="--since")
    assert str(exc.value).startswith("--since: ") and "\n" not in str(exc.value)


# --- read-only, and what is not a journal -----------------------------------------


def _listing(directory: Path) -> dict[str, tuple[int, int, str]]:
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in directory.iterdir()
    }


def test_reading_a_stopped_daemons_journal_creates_and_changes_nothing(tmp_path: Path) -> None:
    data = build(tmp_path / "journal.sqlite3")
    before = _listing(tmp_path)
    assert "journal.sqlite3-wal" not in before, "a clean stop leaves no WAL"
    r = Reader(data["path"])
    r.shoes()
    r.coups(data["shoes"][0])
    r.timeline(data["shoes"][0], 2)
    r.errors("UNREAD_CARD")
    r.shoe_report(data["shoes"][0])
    assert _listing(tmp_path) == before, "no -wal or -shm left behind, not a byte changed"


def test_the_journal_is_opened_read_only_even_when_its_wal_is_there(tmp_path: Path) -> None:
    data = build(tmp_path / "journal.sqlite3")
    with Journal(data["path"]) as writer:  # a daemon holding it open: -wal and -shm exist
        writer.append_input(T0 + 10_000, "tick", b"", [])
        assert Path(f"{data['path']}-wal").exists()
        digest = hashlib.sha256(data["path"].read_bytes()).hexdigest()
        rows = Reader(data["path"]).shoes().rows
        assert len(rows) == 2
        assert hashlib.sha256(data["path"].read_bytes()).hexdigest() == digest
        ro = sqlite3.connect(f"file:{data['path']}?mode=ro", uri=True)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.execute("DELETE FROM events")
        ro.close()


def on_a_read_only_file_system(directory: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with ``directory`` mounted read-only in a private mount
    namespace: what ``ProtectSystem=strict`` makes of /var/lib (and so of the
    daemons' journals) for the board's unit (systemd/shoe-controller-board.service).
    The run fails with 99 should the directory still be writable."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    cmd = [unshare, "-m", "--propagation", "private"] if os.geteuid() == 0 else [unshare, "-r", "-m"]
    if subprocess.run([*cmd, "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace for this user (unshare -m)")
    script = (
        'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" || exit 98; '
        'touch "$0/.probe" 2>/dev/null && exit 99; exec "$@"'
    )
    return subprocess.run(
        [*cmd, "sh", "-c", script, str(directory), *argv], capture_output=True, text=True, timeout=120
    )


def test_history_reads_a_journal_on_a_read_only_file_system_as_under_the_boards_unit(tmp_path: Path) -> None:
    """The board's unit (ProtectSystem=strict) sees the journals read-only.
    SQLite (3.22 and later) reads a WAL journal read-only when its -shm is
    there, which it is while the daemon has it open and after a crash; with
    no WAL (a clean stop) history opens it immutable; a -wal without its
    -shm cannot be read there and is one line saying why."""
    live = tmp_path / "live"
    path = live / "journal.sqlite3"
    Journal(path).close()
    # the daemon's connection, holding a read snapshot: nothing it writes
    # next can be checkpointed into the main file, so all of it is in the WAL
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM events").fetchone()
    data = build(path)
    assert {"journal.sqlite3-wal", "journal.sqlite3-shm"} <= {p.name for p in live.iterdir()}
    main_only = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    # every event is in the WAL: the main file alone has none
    assert main_only.execute("SELECT count(*) FROM events").fetchone() == (0,)
    main_only.close()

    def shoes(journal: Path) -> list[str]:
        argv = (str(SCRIPT), "history", "shoes", "--journal", str(journal), "--json")
        r = on_a_read_only_file_system(journal.parent, *argv)
        assert r.returncode == 0, (r.returncode, r.stderr)
        return [row["shoe"] for row in json.loads(r.stdout)["rows"]]

    assert shoes(path) == data["shoes"]  # while the daemon runs
    # a crash leaves the -wal and the -shm (copied while nothing writes)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm"):
        shutil.copyfile(live / name, crashed / name)
    assert shoes(crashed / "journal.sqlite3") == data["shoes"]
    # a -wal without its -shm: SQLite would have to create the -shm
    (crashed / "journal.sqlite3-shm").unlink()
    argv = (str(SCRIPT), "history", "shoes", "--journal", str(crashed / "journal.sqlite3"))
    r = on_a_read_only_file_system(crashed, *argv)
    line = one_line_error(r, r.returncode)
    assert r.returncode not in (0, 98, 99) and "its -wal is there without its -shm" in line
    # a clean stop: the last connection checkpoints and removes the WAL
    holder.execute("COMMIT")
    holder.close()
    assert not (live / "journal.sqlite3-wal").exists()
    assert shoes(path) == data["shoes"]
    assert not (live / "journal.sqlite3-shm").exists()


@pytest.mark.parametrize("kind", ["text", "empty", "other-sqlite", "directory", "missing"])
def test_a_file_that_is_not_a_journal_is_a_one_line_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "j.sqlite3"
    if kind == "text":
        path.write_text("table: T01\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "other-sqlite":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE things (x)")
        db.commit()
        db.close()
    elif kind == "directory":
        path.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(HistoryError) as exc:
        Reader(path).shoes()
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing created beside it"


def test_queries_run_while_a_daemon_deals_into_the_journal(tmp_path: Path) -> None:
    """A real daemon (fake shoe, as fast as it reads) commits coup after
    coup while history reads the same file: every query answers, counts
    only grow, and at the end history counts what the daemon published."""
    from tests.support.configs import write_config

    cfg = write_config(
        tmp_path, {"driver": "fake", "seed": 3, "cards_per_second": 0, "faults": "unread:0.05,extra:0.03"}
    )
    journal = tmp_path / "journal.sqlite3"
    daemon = subprocess.Popen(
        [str(SCRIPT), "run", "-c", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        reader = Reader(journal)
        seen: list[int] = []
        give_up = time.monotonic() + 120
        while len(set(seen)) < 6:  # six snapshots, each with more coups
            assert time.monotonic() < give_up, f"history saw no dealing: {seen[-5:]}"
            if daemon.poll() is not None:
                pytest.fail(f"the daemon stopped: {daemon.stderr.read() if daemon.stderr else ''}")
            time.sleep(0.02)
            if not journal.exists():
                continue
            try:
                shoes = reader.shoes(limit=MAX_LIMIT).rows
            except HistoryError as exc:
                assert "no events table" in str(exc), exc  # only before the daemon made its schema
                continue
            total = sum(r["settled"] + r["void"] for r in shoes)
            if shoes:
                current = shoes[-1]["shoe"]
                coups = reader.coups(current, limit=MAX_LIMIT).rows
                if coups:
                    tl = reader.timeline(current, coups[-1]["coup"])
                    assert tl["entries"] and tl["shoe"] == current
            assert not seen or total >= seen[-1], "a later snapshot never has fewer coups"
            seen.append(total)
        assert seen[-1] > seen[0], "the daemon dealt on while history read"
    finally:
        daemon.terminate()
        daemon.wait(30)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    published = sum(1 for e in events if e["type"] in ("coup.result", "coup.void"))
    rows = Reader(journal).shoes(limit=MAX_LIMIT).rows
    assert sum(r["settled"] + r["void"] for r in rows) == published


# --- the command line --------------------------------------------------------------


def test_cli_table_json_and_csv_say_the_same(scripted: dict[str, Any]) -> None:
    j = str(scripted["path"])
    shoe = scripted["shoes"][0]
    table = cli("coups", "--journal", j, "--shoe", shoe)
    as_json = cli("coups", "--journal", j, "--shoe", shoe, "--json")
    as_csv = cli("coups", "--journal", j, "--shoe", shoe, "--csv")
    assert table.returncode == as_json.returncode == as_csv.returncode == 0, table.stderr
    doc = json.loads(as_json.stdout)
    assert doc["query"] == "coups" and doc["truncated"] is False and len(doc["rows"]) == 5
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [int(r["coup"]) for r in rows] == [r["coup"] for r in doc["rows"]]
    assert rows[0]["player"] == "6S KH" and rows[2]["void_code"] == "SUPERVISOR_VOID"
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["SHOE", "COUP", "TS", "STATUS"] and len(lines) == 6
    status_at = lines[0].index("STATUS")
    assert all(line[status_at:].split()[0] in ("settled", "void") for line in lines[1:]), "aligned"


def test_cli_csv_quotes_what_needs_quoting(scripted: dict[str, Any]) -> None:
    r = cli("errors", "SUPERVISOR_VOID", "--journal", str(scripted["path"]), "--csv")
    assert r.returncode == 0, r.stderr
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    assert HOSTILE in row["detail"] and row["coup"] == "3"


def test_cli_timeline_in_each_form(scripted: dict[str, Any]) -> None:
    j, shoe = str(scripted["path"]), scripted["shoes"][0]
    text = cli("coup", shoe, "2", "--journal", j)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"table T09  shoe {shoe}  coup 2  SETTLED")
    assert "enter_card id=fix-1 coup=2 card=6S: applied" in text.stdout
    assert "enter_card id=bad-1 coup=2 card=ZZ: no effect in the journal" in text.stdout
    doc = json.loads(cli("coup", shoe, "2", "--journal", j, "--json").stdout)
    assert doc["coup"] == 2 and [c["id"] for c in doc["commands"]] == ["bad-1", "fix-1"]
    rows = list(csv.DictReader(io.StringIO(cli("coup", shoe, "2", "--journal", j, "--csv").stdout)))
    assert [r["kind"] for r in rows] == [e["kind"] for e in doc["entries"]]


def test_cli_reads_the_journal_named_by_the_daemons_config(scripted: dict[str, Any], tmp_path: Path) -> None:
    from tests.support.configs import write_config

    cfg = write_config(tmp_path, {"driver": "fake"}, journal=str(scripted["path"]))
    r = cli("shoes", "-c", str(cfg), "--json")
    assert r.returncode == 0, r.stderr
    assert [x["shoe"] for x in json.loads(r.stdout)["rows"]] == scripted["shoes"]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["coup", "NOPE", "1"], 1, "no shoe 'NOPE'"),
        (["coup", "{shoe}", "99"], 1, "has no coup 99"),
        (["coup", "{shoe}", "0"], 2, "coup: 0 is out of range"),
        (["errors", "BOGUS"], 2, "not a dealing error"),
        (["coups", "--since", "soon"], 2, "--since: 'soon' is not a time"),
        (["coups"], 2, "give --shoe ID"),
        (["shoes", "--limit", "0"], 2, "limit: 0 is out of range"),
        (["report", "{shoe}"], 2, "give --html OUT"),
        (["report", "{shoe2}", "--html", "x.html"], 1, "has not ended"),
        (["report", "{shoe}", "--pdf", "x.pdf", "--chromium", "/nonexistent/chromium"], 1, "apt-get install"),
    ],
)
def test_cli_expected_errors_are_one_line_with_the_specs_exit_code(
    scripted: dict[str, Any], tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    shoe, shoe2 = scripted["shoes"]
    argv = [a.format(shoe=shoe, shoe2=shoe2) for a in args]
    line = one_line_error(cli(*argv, "--journal", str(scripted["path"]), cwd=tmp_path), code)
    assert line.startswith("shoe-controller history: ") and says in line, line
    assert not (tmp_path / "x.pdf").exists() and not (tmp_path / "x.html").exists()


def test_cli_without_a_journal_says_how_to_name_one(tmp_path: Path) -> None:
    line = one_line_error(cli("shoes", cwd=tmp_path), 1)
    assert "no journal there (give --journal PATH or -c CONFIG)" in line
    assert not (tmp_path / "var").exists(), "history creates nothing"


# --- the shoe report -----------------------------------------------------------------


def test_the_report_has_roads_tally_voids_errors_burn_cut_commitment_and_stats(
    scripted: dict[str, Any],
) -> None:
    shoe = scripted["shoes"][0]
    rep = Reader(scripted["path"]).shoe_report(shoe)
    assert rep["shuffle_commit"] == COMMIT
    assert rep["burn"]["first_card"] == "AS" and [c["card"] for c in rep["burn_cards"]] == ["AS", "2C"]
    assert rep["tally"] == {"player": 0, "banker": 3, "tie": 0}
    assert [v["coup"] for v in rep["voids"]] == [3, 4]
    assert [(e["coup"], e["code"]) for e in rep["errors"]] == [
        (2, "UNREAD_CARD"),
        (3, "SUPERVISOR_VOID"),
        (4, "UNREAD_CARD"),
    ]
    assert [c["id"] for c in rep["commands"]] == ["bad-1", "fix-1", "void-1", "late-1", "end-1"]
    assert rep["statistics"]["settled"] == 3 and rep["statistics"]["void"] == 2
    assert rep["statistics"]["longest_banker_run"] == 3
    assert [len(col) for col in rep["roads"]["big_road"]] == [3], "three Banker wins: one column"
    html = report_page(rep, coup_link="/history/T09/coup/x")
    for section in ("Tally", "Roads", "Shoe procedure", "Void coups", "Dealing errors", "Statistics"):
        assert f"<h2>{section}" in html
    assert COMMIT in html and "<svg" in html and "@media print" in html
    assert "<script" not in html, "journal text is escaped"
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', ""), "nothing fetched"
    with pytest.raises(NotEnded):
        Reader(scripted["path"]).shoe_report(scripted["shoes"][1])


def test_cli_report_writes_html_and_a_pdf_printed_by_chromium(
    scripted: dict[str, Any], tmp_path: Path
) -> None:
    from controller.commands.history import find_chromium

    if find_chromium() is None:
        pytest.skip("Chromium is not installed: sudo apt-get install chromium")
    html, pdf = tmp_path / "r.html", tmp_path / "r.pdf"
    r = cli(
        "report",
        scripted["shoes"][0],
        "--journal",
        str(scripted["path"]),
        "--html",
        str(html),
        "--pdf",
        str(pdf),
    )
    assert r.returncode == 0, r.stderr
    assert "report: shoe" in r.stderr and str(pdf) in r.stderr
    assert "<h2>Roads</h2>" in html.read_text()
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and b"%%EOF" in data[-1024:]
    only_pdf = tmp_path / "only.pdf"
    r2 = cli("report", scripted["shoes"][0], "--journal", str(scripted["path"]), "--pdf", str(only_pdf))
    assert r2.returncode == 0 and only_pdf.read_bytes().startswith(b"%PDF-"), r2.stderr
    assert sorted(os.listdir(tmp_path)) == ["only.pdf", "r.html", "r.pdf"]


def test_cli_pdf_without_chromium_on_path_says_what_to_install(
    scripted: dict[str, Any], tmp_path: Path
) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no chromium anywhere on it
    r = subprocess.run(
        [
            *(str(SCRIPT), "history", "report", scripted["shoes"][0], "--journal", str(scripted["path"])),
            *("--html", str(tmp_path / "r.html"), "--pdf", str(tmp_path / "r.pdf")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    line = one_line_error(r, 1)
    assert "--pdf needs Chromium (no chromium on PATH)" in line and "apt-get install chromium" in line
    assert list(tmp_path.iterdir()) == [], "nothing written when the PDF cannot be made"


def test_a_snapshot_the_daemon_changed_under_an_immutable_read_is_read_again(
    scripted: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read without a WAL (immutable), a daemon that starts and checkpoints
    meanwhile would change the file under the read: the identity check
    sees it and reads again; a file that never holds still is an error."""
    reader = Reader(scripted["path"])
    real = Reader._identity
    calls = {"n": 0}

    def moving(self: Reader) -> tuple[int, int, int, bool]:
        calls["n"] += 1
        ino, size, mtime, wal = real(self)
        return ino, size, mtime + (calls["n"] > 1), wal  # changes once, during the first read

    monkeypatch.setattr(Reader, "_identity", moving)
    assert [r["shoe"] for r in reader.shoes().rows] == scripted["shoes"]
    assert calls["n"] == 4, "the first read was thrown away and read again"

    def always(self: Reader) -> tuple[int, int, int, bool]:
        calls["n"] += 1
        ino, size, _, wal = real(self)
        return ino, size, calls["n"], wal

    monkeypatch.setattr(Reader, "_identity", always)
    with pytest.raises(HistoryError, match="kept changing under a read"):
        reader.shoes()


def test_cli_with_a_config_whose_relative_journal_is_not_here_says_where_it_is_read_from(
    tmp_path: Path,
) -> None:
    """``history -c /etc/.../t01.yaml`` from another directory: the config's
    relative journal is the daemon's, relative to where it runs; said so,
    not "give -c" to a user who gave it."""
    cfg = tmp_path / "etc" / "t01.yaml"
    cfg.parent.mkdir()
    cfg.write_text("table: T01\ndevice: {driver: fake}\njournal: ./var/journal.sqlite3\n")
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    line = one_line_error(cli("shoes", "-c", str(cfg), cwd=elsewhere), 1)
    assert line == (
        f"shoe-controller history: {elsewhere}/var/journal.sqlite3: no journal there: {cfg} gives"
        " journal: var/journal.sqlite3, relative to the directory its daemon runs in (under systemd,"
        f" the unit's WorkingDirectory), not to this one ({elsewhere}); run from there,"
        " or give --journal PATH"
    ), line
    # an absolute one that is missing: the daemon may not have started
    cfg.write_text(f"table: T01\ndevice: {{driver: fake}}\njournal: {tmp_path}/state/journal.sqlite3\n")
    line = one_line_error(cli("shoes", "-c", str(cfg), cwd=elsewhere), 1)
    assert line == (
        f"shoe-controller history: {tmp_path}/state/journal.sqlite3: no journal there"
        f" (the journal of {cfg}; has its daemon started?)"
    ), line
    line = one_line_error(cli("shoes", "--journal", str(tmp_path / "nope.sqlite3"), cwd=elsewhere), 1)
    assert line == f"shoe-controller history: {tmp_path}/nope.sqlite3: no journal there (--journal)"
    assert not (elsewhere / "var").exists() and not (tmp_path / "state").exists(), "history creates nothing"


def _burned(j: Journal) -> JournalledTable:
    """A journalled table whose shoe has started and burned (first card A:
    one card burned), its coup 1 next."""
    tb = JournalledTable(j)
    tb.hello()
    tb.new_shoe()
    tb.cards("AS", "2C")
    return tb


def test_a_coup_settled_by_a_later_entry_closed_at_the_entry_not_at_its_results_read_time(
    tmp_path: Path,
) -> None:
    """Frames lost mid-coup, the held cards and RESULT released by the
    supervisor's entry 20 s later: the result keeps its RESULT's read time,
    but the coup closed at the entry, and the review never shows it closed
    before the entry that settled it."""
    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        tb = _burned(j)
        tb.cards("TS", "7C")
        tb.gap(1)  # KH lost
        tb.cards("QD", "9H")
        tb.result()
        tb.t += 20
        reply, _ = tb.command(id="gap-1", cmd="enter_card", coup=1, card="KH")
        assert reply["ok"], reply
        events = list(tb.events)
    result = next(e for e in events if e["type"] == "coup.result")
    entered = next(e for e in events if e["type"] == "card" and e["card"] == "KH")
    assert result["ts"] < entered["ts"]  # the engine's stamps, unchanged
    shoe = next(e["shoe"] for e in events if e["type"] == "shoe.started")
    r = Reader(path)
    tl = r.timeline(shoe, 1)
    assert tl["status"] == "settled" and tl["closed_ts"] == entered["ts"]
    command_at = next(i for i, e in enumerate(tl["entries"]) if e["kind"] == "command")
    result_at = next(i for i, e in enumerate(tl["entries"]) if e["kind"] == "result")
    assert command_at < result_at
    row = next(x for x in r.coups(shoe).rows if x["coup"] == 1)
    assert row["ts"] == entered["ts"]


def test_the_shoe_reports_void_coups_are_listed_by_coup_number(tmp_path: Path) -> None:
    """Coup 1's Banker third card passes unread (awaiting a supervisor: it
    decides no draw, so coup 2 is dealt on), coup 2 is void at once (RESULT
    after two cards), coup 1 void at its deadline: the journal holds the
    voids as 2, 1; the report lists them 1, 2."""
    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        tb = _burned(j)
        tb.cards("TS", "2C", "KH", "KD", "5H")
        tb.card(None)  # B3 unread
        tb.result()
        tb.cards("9S", "2C")
        tb.result()  # coup 2: void at once
        tb.tick(400.0)  # coup 1's deadline
        tb.command(id="end-1", cmd="end_shoe")
        events = list(tb.events)
    assert [e["coup"] for e in events if e["type"] == "coup.void"] == [2, 1]
    shoe = next(e["shoe"] for e in events if e["type"] == "shoe.started")
    rep = Reader(path).shoe_report(shoe)
    assert [v["coup"] for v in rep["voids"]] == [1, 2]
