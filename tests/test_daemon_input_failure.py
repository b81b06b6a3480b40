"""An input the daemon fails on: a bug, never the input's fault. The daemon
says so in one critical log line (input, error, traceback in its
``exception`` field) and exits 1, and what a restart then does is what the
line says: live, the input was not stored, so the next start rebuilds
without it; an input stored in the journal that the engine now fails on
(an engine changed by an upgrade) fails every start alike, named by its id.

The engine bug is simulated: ``Engine.feed`` raises on a coup's RESULT.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller.config import load_config
from controller.daemon import CHECKPOINT_KEY, MAX_FAILED_INPUT_SHOWN, Daemon
from controller.engine.facade import Engine
from controller.engine.machine import IllegalTransition
from controller.shoelog import ShoelogWriter
from drivers.fake import FakeShoe
from tests.support.configs import write_config

RESULT = b"BTN,RESULT"


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """One 1-deck shoe at 1 card a second: about a dozen coups."""
    path = tmp_path / "shoe.shoelog"
    with path.open("w", encoding="utf-8") as fh:
        w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T01"})
        for t, data in FakeShoe(seed=3, decks=1, shoes=1, cut_card_min=12, cards_per_second=1).stream():
            w.write(t, "<", data)
    return path


def failing_on_result(feed: Callable[[Engine, Any], Any]) -> Callable[[Engine, Any], Any]:
    """``Engine.feed`` with the simulated bug (also used by the subprocess below)."""

    def failing(self: Engine, frame: Any) -> Any:
        if getattr(frame, "name", None) == "RESULT":
            raise IllegalTransition("coup 1: simulated engine bug")
        return feed(self, frame)

    return failing


def _bug_on_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Engine, "feed", failing_on_result(Engine.feed))


def _daemon(tmp_path: Path, capture: Path) -> Daemon:
    cfg = write_config(tmp_path, {"driver": "replay", "file": str(capture), "realtime": False})
    return Daemon(load_config(cfg), stdout=io.StringIO(), stop_at_eof=True)


@contextlib.contextmanager
def _journal(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    try:
        with db:
            yield db
    finally:
        db.close()


def _stored_without_checkpoint(tmp_path: Path, capture: Path) -> int:
    """The capture dealt by a sound engine, its checkpoint removed so that
    the next start re-feeds every input; the id of the first RESULT's input."""
    assert _daemon(tmp_path, capture).run() == 0
    with _journal(tmp_path) as db:
        db.execute("DELETE FROM meta WHERE key = ?", (CHECKPOINT_KEY,))
        first_result = db.execute(
            "SELECT min(id) FROM inputs WHERE kind = 'rx' AND instr(data, ?) > 0", (RESULT,)
        ).fetchone()[0]
    assert isinstance(first_result, int)
    return first_result


def _inputs(tmp_path: Path) -> list[bytes]:
    with _journal(tmp_path) as db:
        return [bytes(r[0]) for r in db.execute("SELECT data FROM inputs WHERE kind = 'rx' ORDER BY id")]


def _critical(logs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    found = [x for x in logs if x["log_level"] == "critical"]
    assert len(found) == 1, logs
    return found[0]


def test_a_live_failure_is_one_line_the_input_is_not_stored_and_a_restart_goes_on_without_it(
    tmp_path: Path, capture: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bug_on_result(monkeypatch)
    with structlog.testing.capture_logs() as logs:
        assert _daemon(tmp_path, capture).run() == 1
    line = _critical(logs)
    assert line["event"].startswith("DAEMON FAILED applying an input")
    assert "not stored" in line["event"] and "rebuilds from the journal without it" in line["event"]
    assert line["input_kind"] == "rx" and RESULT.hex() in line["input_data"]
    assert len(line["input_data"]) <= 2 * MAX_FAILED_INPUT_SHOWN
    assert line["error"] == "IllegalTransition: coup 1: simulated engine bug"
    assert isinstance(line["exc_info"], IllegalTransition)
    stored = _inputs(tmp_path)
    assert stored and not any(RESULT in d for d in stored), "the failing read was stored"

    # what the line promises: the next start rebuilds from the journal and goes on
    monkeypatch.undo()
    with structlog.testing.capture_logs() as logs:
        assert _daemon(tmp_path, capture).run() == 0
    assert not [x for x in logs if x["log_level"] == "critical"]
    assert any(x["event"] == "rebuilt from journal" for x in logs)


def test_a_stored_input_the_engine_fails_on_fails_every_start_alike_named_by_its_id(
    tmp_path: Path, capture: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_result = _stored_without_checkpoint(tmp_path, capture)
    _bug_on_result(monkeypatch)
    for _ in range(2):
        with structlog.testing.capture_logs() as logs:
            assert _daemon(tmp_path, capture).run() == 1
        line = _critical(logs)
        assert line["event"].startswith("DAEMON FAILED re-feeding the journal")
        assert "every start fails alike" in line["event"]
        assert line["input_id"] == first_result and line["input_kind"] == "rx"
        assert line["error"] == "IllegalTransition: coup 1: simulated engine bug"


def test_a_stored_input_whose_events_now_differ_is_named_too_not_called_a_write_failure(
    tmp_path: Path, capture: Path
) -> None:
    """The engine reproducing other events than it stored (an upgrade that
    changed them) fails every start alike: the same line, naming the input
    and the conflict, not "journal cannot be written"."""
    result_input = _stored_without_checkpoint(tmp_path, capture)
    with _journal(tmp_path) as db:
        seq, text = db.execute(
            "SELECT seq, json FROM events WHERE type = 'coup.result' ORDER BY seq LIMIT 1"
        ).fetchone()
        event = json.loads(text)
        event["player"]["total"] = (event["player"]["total"] + 1) % 10  # as if stored by another engine
        db.execute("UPDATE events SET json = ? WHERE seq = ?", (json.dumps(event), seq))
    for _ in range(2):
        with structlog.testing.capture_logs() as logs:
            assert _daemon(tmp_path, capture).run() == 1
        line = _critical(logs)
        assert line["event"].startswith("DAEMON FAILED re-feeding the journal")
        assert line["input_id"] == result_input
        assert line["error"].startswith("JournalConflict: ") and f"seq {seq} " in line["error"]
        assert not any("cannot be written" in x["event"] for x in logs)


_RUN_WITH_BUG = """
import sys
from controller.engine.facade import Engine
from tests.test_daemon_input_failure import failing_on_result
Engine.feed = failing_on_result(Engine.feed)
from controller.cli import main
sys.exit(main(["run", "-c", sys.argv[1]]))
"""


def test_the_command_writes_one_json_line_with_the_traceback_in_it_and_exits_1(
    tmp_path: Path, capture: Path
) -> None:
    """What journald gets from ``shoe-controller run``: JSON lines only, the
    traceback inside the critical one, not a bare traceback after it."""
    cfg = write_config(tmp_path, {"driver": "replay", "file": str(capture), "realtime": False})
    done = subprocess.run(
        [sys.executable, "-c", _RUN_WITH_BUG, str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,  # where ``tests`` is importable
    )
    assert done.returncode == 1, done.stderr
    records = [json.loads(x) for x in done.stderr.splitlines()]  # every line is JSON
    critical = [r for r in records if r["level"] == "critical"]
    assert len(critical) == 1, done.stderr
    assert critical[0]["event"].startswith("DAEMON FAILED applying an input")
    assert critical[0]["exception"].startswith("Traceback")
    assert "simulated engine bug" in critical[0]["exception"]
