"""A journal that lost history is never taken for one that is merely
behind: an event id is never issued twice with different content.
Unit tests of ``Journal.claim`` and its high-water mark,
then the daemon itself, a real process, losing its journal three ways."""

from __future__ import annotations

import io
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller import journal as journal_mod
from controller.config import load_config
from controller.daemon import Daemon
from controller.journal import HWM_RESERVE, HWM_SUFFIX, MAX_MARK_SEQ, Journal, JournalError, JournalRefused
from tests.support.configs import write_config


def event(seq: int, table: str = "T01") -> dict[str, Any]:
    return {
        "v": 1,
        "type": "security.alert",
        "event_id": f"{table}/-/{seq}",
        "table": table,
        "shoe": None,
        "seq": seq,
        "ts": "2026-11-22T06:56:11.125Z",
        "code": "TEST",
        "detail": f"event {seq}",
        "coup": None,
    }


def fill(path: Path, upto: int, *, start: int = 1) -> None:
    """A daemon's life: claim, store events ``start..upto``, stop cleanly."""
    with Journal(path) as j:
        assert j.claim("T01").lost is None
        for seq in range(start, upto + 1):
            j.append_input(float(seq), "rx", b"x", [event(seq)])


def mark(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(str(path) + HWM_SUFFIX).read_bytes())
    return data


def remove(path: Path, *suffixes: str) -> None:
    for s in suffixes:
        Path(str(path) + s).unlink(missing_ok=True)


def test_a_first_start_claims_a_new_journal_and_writes_its_mark(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        h = j.claim("T01")
        assert (h.lost, h.seq_floor, h.note) == (None, 0, None)
        assert mark(path)["clean"] is False  # running
        j.append_input(1.0, "rx", b"x", [event(1), event(2)])
        m = mark(path)
        assert m["committed"] == 2 and m["reserved"] >= 2 and m["table"] == "T01"
        assert m["journal"] == j.get_meta("journal_id")
    assert mark(path)["clean"] is True and mark(path)["committed"] == 2


def test_the_mark_reserves_ahead_so_no_issued_seq_ever_exceeds_it(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        j.claim("T01")
        first = mark(path)["reserved"]
        j.append_events([event(first), event(first + 1)])  # past the reservation
        assert mark(path)["reserved"] >= first + 1 + HWM_RESERVE - 1
        assert mark(path)["committed"] == first + 1


def test_a_clean_restart_and_a_journal_merely_behind_are_no_loss(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    fill(path, 5)
    fill(path, 9, start=6)  # claimed again: intact, continues
    with Journal(path) as j:
        assert j.claim("T01").lost is None and j.last_seq() == 9


@pytest.mark.parametrize("how", ["deleted", "truncated to 0 bytes"])
def test_a_deleted_or_truncated_journal_is_lost_history_with_a_floor_above_every_issued_seq(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "j.sqlite3"
    fill(path, 7)
    if how == "deleted":
        remove(path, "", "-wal", "-shm")
    else:
        path.write_bytes(b"")
    with Journal(path) as j:
        h = j.claim("T01")
        assert h.lost is not None and "new and empty" in h.lost and "seq 7" in h.lost
        assert h.seq_floor >= 7
    # Claimed again before the new epoch stored anything: still lost (the
    # mark keeps what was issued), never forgotten by a crash in between.
    with Journal(path) as j:
        assert j.claim("T01").lost is not None


def test_an_older_copy_of_the_same_journal_put_back_is_lost_history(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    fill(path, 3)
    shutil.copy(path, tmp_path / "backup")
    fill(path, 8, start=4)
    shutil.copy(tmp_path / "backup", path)
    with Journal(path) as j:
        h = j.claim("T01")
    assert h.lost is not None and "ends at seq 3" in h.lost and "seq 8" in h.lost


_WRITER = textwrap.dedent(
    """
    import os, sqlite3, sys
    from controller.journal import Journal
    from tests.test_journal_history import event
    path, upto, checkpoint_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    j = Journal(path)
    j.claim("T01")
    for seq in range(1, upto + 1):
        j.append_input(float(seq), "rx", b"x", [event(seq)])
        if seq == checkpoint_at:
            j._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print("ready", flush=True)
    sys.stdin.read()  # killed here
    """
)


def _killed_writer(path: Path, upto: int, checkpoint_at: int) -> None:
    """A real process stores events 1..upto (its WAL checkpointed into the
    main file at ``checkpoint_at``), then is killed with SIGKILL."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(upto), str(checkpoint_at)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert Path(str(path) + "-wal").exists()


def test_a_kill_9_with_the_wal_intact_is_no_loss(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    _killed_writer(path, 12, checkpoint_at=5)
    with Journal(path) as j:
        assert j.claim("T01").lost is None and j.last_seq() == 12


def test_the_wal_deleted_after_a_kill_9_is_lost_history(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    _killed_writer(path, 12, checkpoint_at=5)
    remove(path, "-wal", "-shm")
    with Journal(path) as j:
        h = j.claim("T01")
        assert j.last_seq() == 5  # the checkpointed prefix is all that is left
    assert h.lost is not None and "ends at seq 5" in h.lost and "seq 12" in h.lost
    assert h.seq_floor >= 12


def test_a_missing_wal_after_an_unclean_stop_on_an_earlier_boot_cannot_be_vouched_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a power cut the not-fsynced ``committed`` may lag: a missing WAL
    # is then the only sign of a lost tail.
    path = tmp_path / "j.sqlite3"
    _killed_writer(path, 6, checkpoint_at=6)
    monkeypatch.setattr(journal_mod, "boot_id", lambda: "another-boot")
    with Journal(path) as j:  # the WAL is still there: intact
        assert j.claim("T01").lost is None
    _killed_writer(tmp_path / "k.sqlite3", 6, checkpoint_at=6)
    remove(tmp_path / "k.sqlite3", "-wal", "-shm")
    with Journal(tmp_path / "k.sqlite3") as j:
        h = j.claim("T01")
    assert h.lost is not None and "earlier boot" in h.lost


def test_no_mark_beside_a_journal_with_history_is_taken_as_it_is_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    fill(path, 4)
    remove(path, HWM_SUFFIX)
    with Journal(path) as j:
        h = j.claim("T01")
    assert h.lost is None and h.note is not None and "seq 4" in h.note
    assert mark(path)["committed"] == 4


def test_a_mark_of_another_table_a_held_journal_and_an_unreadable_mark_are_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    fill(path, 2)
    with Journal(path) as j, pytest.raises(JournalError, match=r"belongs to table T01.*not T02"):
        j.claim("T02")
    with Journal(path) as a, Journal(path) as b:
        a.claim("T01")
        with pytest.raises(JournalError, match="another shoe-controller process"):
            b.claim("T01")
    Path(str(path) + HWM_SUFFIX).write_text("garbage\n")
    with Journal(path) as j, pytest.raises(JournalError, match=r"unreadable.*delete the mark"):
        j.claim("T01")


def _mark_with(path: Path, **fields: Any) -> None:
    """A mark of another journal (so the next start is a new epoch above
    its ``reserved``), with ``fields`` as given."""
    data: dict[str, Any] = {
        "table": "T01",
        "journal": "0" * 32,
        "committed": 5,
        "reserved": 10,
        "clean": True,
        "boot": "",
    }
    data.update(fields)
    Path(str(path) + HWM_SUFFIX).write_text(json.dumps(data).ljust(511) + "\n")


def test_a_mark_at_the_seq_bound_is_taken_and_the_new_epoch_fits_sqlite(tmp_path: Path) -> None:
    """At ``MAX_MARK_SEQ`` a journal that lost history carries on above it,
    and its events still fit SQLite's integers."""
    path = tmp_path / "j.sqlite3"
    _mark_with(path, committed=MAX_MARK_SEQ, reserved=MAX_MARK_SEQ)
    with Journal(path) as j:
        h = j.claim("T01")
        assert h.lost is not None and h.seq_floor == MAX_MARK_SEQ
        j.append_input(1.0, "rx", b"x", [event(MAX_MARK_SEQ + 1)])
        assert j.last_seq() == MAX_MARK_SEQ + 1
    assert mark(path)["committed"] == MAX_MARK_SEQ + 1


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("reserved", MAX_MARK_SEQ + 1, str(MAX_MARK_SEQ + 1)),
        ("committed", MAX_MARK_SEQ + 1, str(MAX_MARK_SEQ + 1)),
        ("reserved", 2**63 - 1, str(2**63 - 1)),  # SQLite's largest: no room above it
        ("reserved", 10**30, "1" + "0" * 30),
        ("reserved", -1, "-1"),
        ("committed", -1, "-1"),
        ("reserved", 1.5, "1.5"),
        ("reserved", 100.0, "100.0"),
        ("reserved", True, "true"),
        ("reserved", "12", '"12"'),
        ("reserved", None, "null"),
        ("reserved", float("nan"), "NaN"),
        ("reserved", float("inf"), "Infinity"),  # (1e400 in the file reads as this)
    ],
)
def test_a_mark_holding_a_seq_outside_the_bound_is_refused_with_what_to_do(
    tmp_path: Path, key: str, value: Any, shown: str
) -> None:
    path = tmp_path / "j.sqlite3"
    _mark_with(path, **{key: value})
    with Journal(path) as j, pytest.raises(JournalRefused) as err:
        j.claim("T01")
    text = str(err.value)
    assert f"holds {key} {shown}, not a seq (an integer 0..{MAX_MARK_SEQ})" in text
    assert "delete the mark and start again" in text and "\n" not in text


def test_the_daemon_refuses_such_a_mark_in_one_line_and_exit_1_at_every_start(tmp_path: Path) -> None:
    """Before: ``OverflowError`` (a traceback, outside any handler) at every
    start, its new epoch's first seq beyond SQLite's integers."""
    _mark_with(tmp_path / "journal.sqlite3", reserved=10**30)
    capture = Path(__file__).parent / "captures" / "profile_punto_banco.shoelog"
    cfg = load_config(write_config(tmp_path, {"driver": "replay", "file": str(capture)}))
    for _ in range(2):
        with structlog.testing.capture_logs() as logs:
            assert Daemon(cfg, stdout=io.StringIO(), stop_at_eof=True).run() == 1
        critical = [x for x in logs if x["log_level"] == "critical"]
        assert len(critical) == 1, logs
        assert critical[0]["event"] == "journal refused: the daemon does not start"
        assert "holds reserved 1000000000000000000000000000000, not a seq" in critical[0]["error"]
    assert not (tmp_path / "events.jsonl").exists() or not (tmp_path / "events.jsonl").read_text()


# --- the daemon, a real process ---------------------------------------------


def _config(tmp_path: Path) -> Path:
    return write_config(tmp_path, {"driver": "fake", "seed": 3, "cards_per_second": 60})


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _run_until(tmp_path: Path, more: int, sig: signal.Signals, *, checkpoint_at: int = 0) -> None:
    """Run the daemon until ``more`` further events are in the JSONL file,
    then stop it with ``sig``; optionally checkpoint its WAL midway."""
    events = tmp_path / "events.jsonl"
    start = len(_lines(events))
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "-c", str(_config(tmp_path))],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "stderr", "ab"),  # noqa: SIM115 - the child owns it
    )
    deadline = time.monotonic() + 60
    try:
        checkpointed = False
        while len(_lines(events)) < start + more:
            assert proc.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            assert time.monotonic() < deadline, "the daemon dealt too little"
            if checkpoint_at and not checkpointed and len(_lines(events)) >= start + checkpoint_at:
                db = sqlite3.connect(tmp_path / "journal.sqlite3")
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                db.close()
                checkpointed = True
            time.sleep(0.05)
    finally:
        proc.send_signal(sig)
        proc.wait(30)


@pytest.mark.parametrize(
    "loss", ["journal deleted", "journal truncated to 0 bytes", "WAL deleted after kill -9"]
)
def test_the_daemon_never_reissues_an_event_id_after_losing_its_journal(tmp_path: Path, loss: str) -> None:
    journal = tmp_path / "journal.sqlite3"
    if loss == "WAL deleted after kill -9":
        _run_until(tmp_path, 60, signal.SIGKILL, checkpoint_at=20)
        assert Path(str(journal) + "-wal").exists()
        remove(journal, "-wal", "-shm")
    else:
        _run_until(tmp_path, 40, signal.SIGTERM)
        if loss == "journal deleted":
            remove(journal, "", "-wal", "-shm")
        else:
            journal.write_bytes(b"")
    before = _lines(tmp_path / "events.jsonl")
    issued = max(e["seq"] for e in before)
    _run_until(tmp_path, 40, signal.SIGTERM)

    after = _lines(tmp_path / "events.jsonl")[len(before) :]
    seen = {e["event_id"]: e for e in before}
    for e in after:
        assert seen.setdefault(e["event_id"], e) == e, f"{e['event_id']} re-issued with other content"
    lost = [e for e in after if e["type"] == "security.alert" and e["code"] == "JOURNAL_LOST"]
    assert len(lost) == 1, after[:3]
    alert = lost[0]
    assert alert["seq"] > issued and "lost history" in alert["detail"]
    # before the alert only what the damaged journal still held and had not
    # delivered (a WAL checkpoint keeps a prefix): the same events again
    start = after.index(alert)
    assert all(e["seq"] <= issued for e in after[:start])
    assert all(e["seq"] > issued for e in after[start:]), "the new epoch continues above every issued seq"
    assert [e["seq"] for e in after[start:]] == sorted(e["seq"] for e in after[start:])
    assert "JOURNAL LOST HISTORY" in (tmp_path / "stderr").read_text()
