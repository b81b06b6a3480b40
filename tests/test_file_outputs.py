"""stdout and JSON-lines outputs: every journalled event once, in order, one
JSON object per line, resuming after the delivery mark."""

from __future__ import annotations

import errno
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from controller.journal import Journal
from controller.outputs.jsonl import JsonlOutput
from controller.outputs.stdout import StdoutOutput


def event(seq: int) -> dict[str, Any]:
    return {
        "v": 1,
        "type": "card",
        "event_id": f"T01/S/{seq}",
        "table": "T01",
        "shoe": "S",
        "seq": seq,
        "ts": "2026-11-22T06:56:11.125Z",
        "card": "7H",
    }


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.sqlite3")


def lines(text: str) -> list[int]:
    return [json.loads(line)["seq"] for line in text.splitlines() if line]


def test_stdout_writes_each_event_once_as_a_json_line(journal: Journal) -> None:
    stream = io.StringIO()
    out = StdoutOutput(journal, stream=stream, batch=3)
    journal.append_events([event(i) for i in range(1, 8)])
    assert out.pump() == 7
    assert out.pump() == 0
    assert lines(stream.getvalue()) == list(range(1, 8))
    assert json.loads(stream.getvalue().splitlines()[0]) == event(1)
    assert journal.mark("stdout") == 7


def test_stdout_after_a_restart_prints_only_what_was_not_printed(journal: Journal) -> None:
    journal.append_events([event(1), event(2)])
    StdoutOutput(journal, stream=io.StringIO()).pump()
    journal.append_events([event(3)])
    again = io.StringIO()
    StdoutOutput(journal, stream=again).pump()
    assert lines(again.getvalue()) == [3]


def test_jsonl_appends_events_in_order(journal: Journal, tmp_path: Path) -> None:
    path = tmp_path / "var" / "events.jsonl"
    out = JsonlOutput(journal, path)
    journal.append_events([event(1), event(2)])
    out.pump()
    journal.append_events([event(3)])
    out.pump()
    out.close()
    assert lines(path.read_text()) == [1, 2, 3]
    assert journal.backlog("jsonl") == 0


def test_jsonl_reopen_follows_logrotate(journal: Journal, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    out = JsonlOutput(journal, path)
    journal.append_events([event(1)])
    out.pump()
    path.rename(tmp_path / "events.jsonl.1")
    out.reopen()
    journal.append_events([event(2)])
    out.pump()
    out.close()
    assert lines((tmp_path / "events.jsonl.1").read_text()) == [1]
    assert lines(path.read_text()) == [2]


def test_jsonl_cuts_off_a_torn_last_line_found_at_open(journal: Journal, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"seq": 0}\n{"seq": 1, "type": "ca')  # a crash mid-write
    out = JsonlOutput(journal, path)
    journal.append_events([event(1)])
    out.pump()
    out.close()
    assert path.read_text() == '{"seq": 0}\n' + json.dumps(event(1), separators=(",", ":")) + "\n"


def test_jsonl_file_that_is_one_torn_line_is_emptied_at_open(journal: Journal, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"seq": 1, "type": "' + b"x" * 200_000)  # longer than one look-back chunk
    out = JsonlOutput(journal, path)
    out.close()
    assert path.read_bytes() == b""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_jsonl_write_failure_keeps_the_events_pending(journal: Journal) -> None:
    out = JsonlOutput(journal, "/dev/full")  # every write: ENOSPC
    journal.append_events([event(1), event(2)])
    assert out.pump() == 0
    assert journal.backlog("jsonl") == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_jsonl_whose_directory_cannot_be_made_fails_without_raising_and_retries(
    journal: Journal, tmp_path: Path
) -> None:
    blocker = tmp_path / "var"
    blocker.write_text("a file where the directory should be")  # root ignores modes: this holds for all
    clock = Clock()
    out = JsonlOutput(journal, blocker / "events.jsonl", retry_s=5.0, clock=clock)
    assert out.failure is not None and "cannot open" in out.failure and out.errors == 1
    journal.append_events([event(1), event(2)])
    assert out.pump() == 0 and out.errors == 1  # not retried before its time
    clock.now += 5.0
    assert out.pump() == 0 and out.errors == 2  # retried, still failing
    blocker.unlink()
    blocker.mkdir()
    assert out.pump() == 0  # fixed, but the next attempt is not due yet
    clock.now += 5.0
    assert out.pump() == 2 and out.failure is None
    assert lines((blocker / "events.jsonl").read_text()) == [1, 2]
    assert journal.backlog("jsonl") == 0


def test_jsonl_that_cannot_be_reopened_on_sighup_fails_and_recovers(journal: Journal, tmp_path: Path) -> None:
    clock = Clock()
    out = JsonlOutput(journal, tmp_path / "log" / "events.jsonl", retry_s=5.0, clock=clock)
    journal.append_events([event(1)])
    assert out.pump() == 1
    (tmp_path / "log").rename(tmp_path / "log.1")
    (tmp_path / "log").write_text("not a directory")
    out.reopen()  # what SIGHUP does: must not raise
    assert out.failure is not None and "cannot reopen" in out.failure
    journal.append_events([event(2), event(3)])
    assert out.pump() == 0 and journal.backlog("jsonl") == 2
    (tmp_path / "log").unlink()
    clock.now += 5.0
    assert out.pump() == 2 and out.failure is None
    assert lines((tmp_path / "log.1" / "events.jsonl").read_text()) == [1]
    assert lines((tmp_path / "log" / "events.jsonl").read_text()) == [2, 3]


class DiskFull:
    """``os.write`` on the output's file as on a disk that fills part-way:
    while ``full``, the first write stores ``room`` bytes, the next raises
    ENOSPC (as the kernel does: a short write, then the error). Writes to
    any other descriptor go through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path, room: int) -> None:
        self.path, self.room, self.full, self.fails = path, room, True, 0
        self._real = os.write
        monkeypatch.setattr(os, "write", self)

    def _ours(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except OSError:
            return False

    def __call__(self, fd: int, data: Any) -> int:
        if not self.full or not self._ours(fd):
            return self._real(fd, data)
        left = self.room - os.fstat(fd).st_size
        if left > 0:
            return self._real(fd, bytes(data)[:left])
        self.fails += 1
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def parsed(path: Path) -> list[int]:
    """The seqs in the file, every line complete (newline-ended) and
    parsable: a torn line anywhere fails the test."""
    text = path.read_bytes().decode("utf-8")
    assert text == "" or text.endswith("\n"), f"torn last line: {text[-80:]!r}"
    return [json.loads(line)["seq"] for line in text.split("\n")[:-1]]


def test_jsonl_on_a_disk_that_fills_mid_write_leaves_no_torn_line_and_no_event_lost_or_doubled(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.jsonl"
    clock = Clock()
    out = JsonlOutput(journal, path, batch=3, retry_s=5.0, clock=clock)
    journal.append_events([event(1), event(2)])
    assert out.pump() == 2
    size = path.stat().st_size
    # Room for one and a half more lines: the next batch (3, 4, 5) is cut
    # in the middle of event 4.
    disk = DiskFull(monkeypatch, path, room=size + size // 2 + size // 4)
    journal.append_events([event(i) for i in range(3, 9)])
    assert out.pump() == 0 and disk.fails == 1
    assert out.failure is not None and "No space left" in out.failure  # health: failing
    assert parsed(path) == [1, 2]  # the part-written batch is undone
    clock.now += 5.0
    assert out.pump() == 0 and out.failure is not None  # still full: retried, still undone
    assert parsed(path) == [1, 2]
    assert journal.backlog("jsonl") == 6
    disk.full = False  # space returns
    assert out.pump() == 0  # not before the retry is due
    clock.now += 5.0
    assert out.pump() == 6 and out.failure is None
    out.close()
    assert parsed(path) == list(range(1, 9))
    assert journal.backlog("jsonl") == 0


def test_jsonl_whose_fsync_fails_after_a_whole_write_does_not_write_the_batch_twice(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.jsonl"
    clock = Clock()
    out = JsonlOutput(journal, path, retry_s=5.0, clock=clock)
    journal.append_events([event(1)])
    assert out.pump() == 1
    real_fsync, fails = os.fsync, [1]

    def fsync(fd: int) -> None:  # delayed allocation: the write took, the flush finds no room
        if fails:
            fails.pop()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    journal.append_events([event(2), event(3)])
    assert out.pump() == 0 and out.failure is not None
    assert parsed(path) == [1]
    clock.now += 5.0
    assert out.pump() == 2 and out.failure is None
    out.close()
    assert parsed(path) == [1, 2, 3]


def test_jsonl_whose_torn_write_cannot_be_cut_off_writes_nothing_after_it_until_it_can(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.jsonl"
    clock = Clock()
    out = JsonlOutput(journal, path, batch=2, retry_s=5.0, clock=clock)
    journal.append_events([event(1)])
    assert out.pump() == 1
    size = path.stat().st_size
    disk = DiskFull(monkeypatch, path, room=size + size // 2)
    real_ftruncate, cut_works = os.ftruncate, [False]

    def ftruncate(fd: int, length: int) -> None:
        if not cut_works[0]:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_ftruncate(fd, length)

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    journal.append_events([event(2), event(3), event(4)])
    assert out.pump() == 0
    assert out.failure is not None and "cannot cut off a torn write" in out.failure
    # The format's rule: a reader takes newline-ended lines only; the torn
    # bytes are the file's last line, with no newline after them.
    text = path.read_text()
    assert not text.endswith("\n") and [json.loads(x)["seq"] for x in text.split("\n")[:-1]] == [1]
    disk.full = False
    for _ in range(3):  # space is back, the cut still fails: nothing is written after the torn bytes
        clock.now += 5.0
        assert out.pump() == 0 and out.failure is not None
        assert path.read_text() == text
    cut_works[0] = True
    clock.now += 5.0
    assert out.pump() == 3 and out.failure is None
    out.close()
    assert parsed(path) == [1, 2, 3, 4]
    assert journal.backlog("jsonl") == 0


def test_jsonl_reopened_after_logrotate_while_a_torn_write_cannot_be_cut_leaves_it_last_in_the_old_file(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.jsonl"
    clock = Clock()
    out = JsonlOutput(journal, path, retry_s=5.0, clock=clock)
    journal.append_events([event(1)])
    assert out.pump() == 1
    size = path.stat().st_size
    disk = DiskFull(monkeypatch, path, room=size + size // 2)
    real_ftruncate = os.ftruncate

    def ftruncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    journal.append_events([event(2)])
    assert out.pump() == 0
    rotated = tmp_path / "events.jsonl.1"
    path.rename(rotated)  # logrotate, then SIGHUP: the cut still fails
    disk.full = False
    out.reopen()
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    clock.now += 5.0
    assert out.pump() == 1 and out.failure is None
    out.close()
    old = rotated.read_text()
    assert not old.endswith("\n")  # the torn bytes: the old file's last line, no newline after them
    assert [json.loads(x)["seq"] for x in old.split("\n")[:-1]] == [1]
    assert parsed(path) == [2]


def test_jsonl_after_logrotate_copytruncate_writes_at_the_new_end_with_no_hole(
    journal: Journal, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    out = JsonlOutput(journal, path)
    journal.append_events([event(1)])
    assert out.pump() == 1
    os.truncate(path, 0)  # copytruncate: copied elsewhere, emptied under the open file, no SIGHUP
    journal.append_events([event(2)])
    assert out.pump() == 1
    out.close()
    assert parsed(path) == [2]  # O_APPEND: not written at the old offset after a run of NULs
