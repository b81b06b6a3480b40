"""The journal's checkpoints taken ahead (``Journal.checkpoint_ahead``): a
thread of their own, so that SQLite does not run its checkpoint inside the
commit that takes the WAL past 1,000 frames (a card's commit, one in about
160). What they must keep: every commit readable and intact, the WAL
bounded and rewritten from its start, SQLite's own checkpoint back should
the thread fail, and nothing left running after ``close``. No timings here:
``benchmarks/bench_latency.py`` measures the effect."""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import controller.journal as journal_mod
from controller.journal import CHECKPOINT_AHEAD_COMMITS, WAL_BACKSTOP_FRAMES, Journal
from tests.test_journal import event

#: a WAL frame: a 4 KiB page behind its 24-byte header
FRAME = 4096 + 24


def _autocheckpoint(j: Journal) -> int:
    return int(j._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def _commit(j: Journal, seq: int) -> None:
    j.append_input(float(seq), "rx", b"$SH,1,CARD,QS*00\r\n", [event(seq)])


def _wait_done(j: Journal, done: int) -> None:
    ahead = j._ahead
    assert ahead is not None
    deadline = time.monotonic() + 10
    while ahead.done < done and ahead.error is None:
        assert time.monotonic() < deadline, "the checkpoint did not finish"
        time.sleep(0.005)


def _checkpointer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "journal-checkpoint"]


def test_none_is_taken_before_enough_commits_and_one_is_at_the_bound(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        seq = 0
        # (opening the journal committed its schema: that counts too)
        while j._commits < CHECKPOINT_AHEAD_COMMITS - 1:
            seq += 1
            _commit(j, seq)
        # one commit short of the bound: nothing started, SQLite's own untouched
        assert j.checkpoint_ahead() is False
        assert j._ahead is None
        assert _autocheckpoint(j) == 1000
        _commit(j, seq + 1)
        assert j.checkpoint_ahead() is True
        # SQLite's own now waits for the backstop only
        assert _autocheckpoint(j) == WAL_BACKSTOP_FRAMES
        _wait_done(j, 1)
        assert j._ahead is not None and j._ahead.frames >= seq
        # not due again until as many commits more
        assert j.checkpoint_ahead() is False


def test_the_wal_stays_bounded_and_every_commit_stays_readable(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    seq = 0
    sizes: list[int] = []
    with Journal(path) as j:
        for _ in range(12):
            for _ in range(CHECKPOINT_AHEAD_COMMITS):
                seq += 1
                _commit(j, seq)
            started = j._ahead.done if j._ahead is not None else 0
            assert j.checkpoint_ahead() is True
            _wait_done(j, started + 1)
            sizes.append(os.path.getsize(str(path) + "-wal"))
        # Without checkpoints (SQLite's own moved to 10,000 frames), 600
        # commits of about 6 frames would take the WAL to about 15 MB. With
        # them it is rewritten from its start: it grows no further after the
        # first round: it stays near one round's frames (a commit that
        # splits a page writes a few more).
        assert max(sizes) < 1.5 * sizes[0], sizes
        assert max(sizes) < 3 * CHECKPOINT_AHEAD_COMMITS * 8 * FRAME, sizes
        assert [p.seq for p in j.events_since(0)] == list(range(1, seq + 1))
    # a fresh process sees every commit (the database file has them too)
    with Journal(path) as j:
        assert j.last_seq() == seq
        assert [r.id for r in j.inputs_since(0)] == list(range(1, seq + 1))


def test_commits_go_on_while_a_checkpoint_runs(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        for seq in range(1, CHECKPOINT_AHEAD_COMMITS + 1):
            _commit(j, seq)
        assert j.checkpoint_ahead() is True
        # committing at once, beside the checkpoint, is neither refused nor lost
        for seq in range(CHECKPOINT_AHEAD_COMMITS + 1, 3 * CHECKPOINT_AHEAD_COMMITS + 1):
            _commit(j, seq)
        _wait_done(j, 1)
        assert j.ahead_failure is None
        assert j.last_seq() == 3 * CHECKPOINT_AHEAD_COMMITS


def test_a_failed_checkpoint_puts_sqlites_own_back_and_none_is_taken_again(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        for seq in range(1, CHECKPOINT_AHEAD_COMMITS + 1):
            _commit(j, seq)
        assert j.checkpoint_ahead() is True
        _wait_done(j, 1)
        ahead = j._ahead
        assert ahead is not None
        # the thread's connection breaks (as on a disk error): its next
        # checkpoint fails
        ahead._db.close()
        for seq in range(CHECKPOINT_AHEAD_COMMITS + 1, 2 * CHECKPOINT_AHEAD_COMMITS + 1):
            _commit(j, seq)
        assert j.checkpoint_ahead() is True
        deadline = time.monotonic() + 10
        while ahead.error is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        for seq in range(2 * CHECKPOINT_AHEAD_COMMITS + 1, 3 * CHECKPOINT_AHEAD_COMMITS + 1):
            _commit(j, seq)
        assert j.checkpoint_ahead() is False
        assert j.ahead_failure is not None and "closed" in j.ahead_failure
        assert _autocheckpoint(j) == 1000
        assert j._ahead is None
        assert not _checkpointer_threads()
        # and it stays so: the commits go on as before
        for seq in range(3 * CHECKPOINT_AHEAD_COMMITS + 1, 4 * CHECKPOINT_AHEAD_COMMITS + 1):
            _commit(j, seq)
        assert j.checkpoint_ahead() is False
        assert j.last_seq() == 4 * CHECKPOINT_AHEAD_COMMITS


def test_close_stops_the_thread_and_leaves_a_clean_file(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    j = Journal(path)
    for seq in range(1, CHECKPOINT_AHEAD_COMMITS + 1):
        _commit(j, seq)
    assert j.checkpoint_ahead() is True
    j.close()
    assert not _checkpointer_threads()
    # the last connection closed checkpointed the rest and removed the WAL
    assert not os.path.exists(str(path) + "-wal")
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM events").fetchone()[0] == CHECKPOINT_AHEAD_COMMITS
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def test_the_daemon_takes_them_while_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the daemon's idle step: dealing from the fake shoe (idle
    between its cards), it starts checkpoints ahead, and the journal ends
    with every event, in order."""
    from controller.config import load_config
    from controller.daemon import Daemon
    from tests.support.configs import write_config

    monkeypatch.setattr(journal_mod, "CHECKPOINT_AHEAD_COMMITS", 5)
    started: list[int] = []
    real = Journal.checkpoint_ahead

    def counting(self: Journal) -> bool:
        took = real(self)
        if took:
            started.append(self._commits)
        return took

    monkeypatch.setattr(Journal, "checkpoint_ahead", counting)
    cfg = load_config(
        write_config(tmp_path, {"driver": "fake", "seed": 4, "cards_per_second": 200}, odds=True)
    )
    daemon = Daemon(cfg)
    result: list[int] = []
    th = threading.Thread(target=lambda: result.append(daemon.run()))
    th.start()
    try:
        deadline = time.monotonic() + 30
        while len(started) < 3 and time.monotonic() < deadline and th.is_alive():
            time.sleep(0.02)
    finally:
        daemon.request_stop()
        th.join(30)
    assert result == [0]
    assert len(started) >= 3, started
    # each one only once enough commits had come since the one before
    assert all(b - a >= 5 for a, b in itertools.pairwise(started)), started
    assert not _checkpointer_threads()
    with Journal(tmp_path / "journal.sqlite3") as j:
        assert j.last_seq() > 0
        assert [p.seq for p in j.events_since(0)] == list(range(1, j.last_seq() + 1))
