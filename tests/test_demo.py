"""What a newcomer sees: ``run`` on a terminal prints a
line per coup, piped it prints exactly the JSON lines of docs/events.md, and
``make demo`` starts a fresh demo every time (quietly installed)."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from controller.outputs.text import render
from tests.test_cli_errors import SCRIPT

ROOT = Path(__file__).parent.parent
CAPTURES = Path(__file__).parent / "captures"


def _expected(name: str) -> list[dict[str, object]]:
    text = (CAPTURES / f"{name}.expected.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


# --- the lines themselves ---------------------------------------------------


def test_a_coup_is_one_line_with_cards_totals_and_winner() -> None:
    lines = [line for e in _expected("profile_punto_banco") if (line := render(e)) is not None]
    coups = [line for line in lines if line.startswith("coup")]
    results = [e for e in _expected("profile_punto_banco") if e["type"] == "coup.result"]
    assert len(coups) == len(results) > 0
    first = results[0]
    player, banker = first["player"], first["banker"]
    assert isinstance(player, dict) and isinstance(banker, dict)
    assert f"Player {' '.join(player['cards'])} = {player['total']}" in coups[0]
    assert f"Banker {' '.join(banker['cards'])} = {banker['total']}" in coups[0]
    assert coups[0].startswith(f"coup {first['coup']:>3}  ")
    # cards, odds and roads have no line of their own
    assert not any(render(e) for e in _expected("profile_punto_banco") if e["type"] in ("card", "roads"))


def test_a_misdeal_and_a_void_coup_say_what_happened() -> None:
    lines = [line for e in _expected("x_sequence_gap") if (line := render(e)) is not None]
    assert (
        "coup   1  misdeal SEQUENCE_GAP, awaiting supervisor until 08:28:48 UTC: frames lost: "
        "expected sequence 8, received 9 (1 missing)"
    ) in lines
    assert "coup   1  VOID (SEQUENCE_GAP): not corrected within 120 s [P1 6S, B1 7C, extra QD]" in lines, (
        lines
    )


def test_a_side_bet_tag_shows_only_where_the_table_has_that_bet_and_is_named() -> None:
    """``banker7`` on a punto banco table is a fact for programs, not news
    for the person watching; ``dragon7`` on an EZ Baccarat table is a bet."""
    dragon = {
        "type": "coup.result", "coup": 5, "demo": False, "winner": "banker", "natural": False,
        "player": {"cards": ["5H", "KD", "QS"], "total": 5},
        "banker": {"cards": ["3S", "2D", "2C"], "total": 7},
        "player_pair": False, "banker_pair": False, "tags": ["banker7", "dragon7"], "corrections": [],
    }  # fmt: skip
    punto = {**dragon, "settlement": {"player": -1, "banker": 0.95, "tie": -1}}
    line = render(punto)
    assert line == "coup   5  Player 5H KD QS = 5    Banker 3S 2D 2C = 7    banker wins", line
    ez = {**dragon, "settlement": {"player": -1, "banker": 0, "tie": -1, "dragon7": 40, "panda8": -1}}
    line = render(ez)
    assert line is not None
    assert line.endswith("banker wins  (Dragon 7: Banker wins with three cards totalling 7)"), line


# --- run: a terminal or a pipe ----------------------------------------------


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        "table: T01\n"
        "device: {driver: fake, seed: 4, cards_per_second: 0}\n"
        f"journal: {tmp_path / 'journal.sqlite3'}\n"
        "odds: false\n"
    )
    return config


def _on_a_terminal(argv: Sequence[str], until: str, cwd: Path, timeout: float = 60) -> str:
    """Run ``argv`` with stdout on a pseudo-terminal until a whole line with
    ``until`` in it shows, then interrupt it; the whole lines it wrote there
    up to that one (a line still being written is not returned: a read
    returns what the terminal holds, which on a loaded machine may end in the
    middle of a line, or of a character)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        list(argv), stdout=slave, stderr=subprocess.DEVNULL, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    lines: list[bytes] = []
    pending = b""
    deadline = time.monotonic() + timeout
    try:
        while not (lines and until.encode() in lines[-1]) and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program closed the terminal
                break
            if not chunk:
                break
            *whole, pending = (pending + chunk).split(b"\n")
            for line in whole:
                lines.append(line.removesuffix(b"\r"))
                if until.encode() in line:
                    break
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        # Keep reading what it writes while it stops, as a terminal does: a
        # terminal nobody reads fills up, and a program writing to it waits.
        stop_by = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < stop_by:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        proc.wait(30)
        os.close(master)
    text = [line.decode() for line in lines]
    assert text and until in text[-1], f"no whole line with {until!r} in {timeout} s: {text}"
    return "\n".join(text) + "\n"


def test_run_on_a_terminal_prints_a_line_per_coup(tmp_path: Path) -> None:
    out = _on_a_terminal([str(SCRIPT), "run", "-c", str(_config(tmp_path))], "coup   3", tmp_path)
    lines = out.splitlines()
    assert lines[0] == "device online (HELLO) FAKE-SHOE 1.0", lines
    assert lines[1].startswith("--- shoe ") and lines[2].startswith("--- burn: first card ")
    assert lines[3].startswith("coup   1  Player "), lines
    assert not any(line.startswith("{") for line in lines)


def test_run_json_on_a_terminal_prints_json_lines(tmp_path: Path) -> None:
    out = _on_a_terminal(
        [str(SCRIPT), "run", "-c", str(_config(tmp_path)), "--json"], '"type":"coup.result"', tmp_path
    )
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert events[-1]["type"] == "coup.result"
    assert events[0]["type"] == "device.status"
    assert any(e["type"] == "card" for e in events)


def test_run_piped_writes_exactly_json_lines_with_no_config(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [str(SCRIPT), "run"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path, text=True
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events[:2]] == ["device.status", "shoe.started"]
    assert (tmp_path / "var" / "journal.sqlite3").exists()  # the default journal under ./var/


# --- make demo --------------------------------------------------------------


def _make() -> str:
    found = shutil.which("make")
    if found is None:
        pytest.fail("make is not installed")
    return found


def test_make_demo_twice_starts_a_fresh_demo_each_time(tmp_path: Path) -> None:
    """The second demo used to resume the first one's journal: the fake shoe
    starts again from its seed, so the controller saw a device restart
    mid-coup, a SEQUENCE_GAP and a void coup before anything else."""
    demo_dir = tmp_path / "demo"
    argv = [_make(), "-s", "--no-print-directory", "-C", str(ROOT), "demo", f"DEMO_DIR={demo_dir}"]
    first = _on_a_terminal(argv, "coup   1", tmp_path, timeout=120)
    assert (demo_dir / "var" / "journal.sqlite3").exists()
    second = _on_a_terminal(argv, "coup   1", tmp_path, timeout=120)
    for out in (first, second):
        lines = out.splitlines()
        assert lines[0] == "device online (HELLO) FAKE-SHOE 1.0", out
        assert lines[1].startswith("--- shoe ") and lines[2].startswith("--- burn")
        assert lines[3].startswith(("coup   1  ", "ALERT ")), out
        # a fresh journal: no restart, gap or void carried over from the last demo
        assert "SEQUENCE_GAP" not in out and "DEVICE_FAULT" not in out
    # a new shoe each run (a random seed): the burns and first coups differ
    assert first.splitlines()[2:4] != second.splitlines()[2:4]


def test_the_default_dealer_errs_so_the_demo_shows_misdeals_corrections_and_voids(tmp_path: Path) -> None:
    """The embedded default (``run`` with no config, ``make demo``) deals
    with a dealer who errs now and then: within a shoe the person watching
    sees a misdeal flagged, one corrected and a coup void (a fixed seed
    here, so the test deals the same shoe every time)."""
    from controller.config import DEMO_FAULTS, default_config

    cfg = default_config(seed=3)
    assert cfg.device.faults == DEMO_FAULTS  # type: ignore[union-attr]
    config = tmp_path / "demo.yaml"
    config.write_text(
        "table: T01\n"
        f"device: {{driver: fake, seed: 3, cards_per_second: 0, faults: '{DEMO_FAULTS}'}}\n"
        f"journal: {tmp_path / 'journal.sqlite3'}\n"
        "odds: false\n"
    )
    out = _on_a_terminal([str(SCRIPT), "run", "-c", str(config)], "coup  20", tmp_path, timeout=120)
    assert " misdeal " in out and ", corrected:" in out and " VOID (" in out, out
    assert "banker7" not in out and "dragon7" not in out  # no side-bet tags on a punto banco table


def test_make_demo_piped_is_json_lines(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [_make(), "-s", "--no-print-directory", "-C", str(ROOT), "demo", f"DEMO_DIR={tmp_path / 'demo'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
    assert [json.loads(line)["type"] for line in lines] == ["device.status", "shoe.started", "card"]
