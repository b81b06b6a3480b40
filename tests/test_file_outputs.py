"""stdout and JSON-lines outputs: every journalled event once, in order, one
JSON object per line, resuming after the delivery mark."""

from __future__ import annotations

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


def test_jsonl_starts_a_fresh_line_after_a_torn_last_line(journal: Journal, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"seq": 0}\n{"seq": 1, "type": "ca')  # a crash mid-write
    out = JsonlOutput(journal, path)
    journal.append_events([event(1)])
    out.pump()
    out.close()
    assert path.read_text().splitlines()[-1] == json.dumps(event(1), separators=(",", ":"))


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
