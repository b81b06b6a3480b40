"""Terminals are for people: ``replay``, ``roads`` and ``archive --stats /
--backfill`` print a line per coup, a drawn road and sentences on a
terminal, and JSON when piped or with ``--json`` (as ``run`` does), each
run under a pseudo-terminal as a user meets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.terminal import on_a_terminal

REPO = Path(__file__).parent.parent
SCRIPT = Path(sys.executable).with_name("shoe-controller")
SAMPLE = REPO / "docs" / "sample-shoe.shoelog"


def _piped(*args: str) -> str:
    r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=True)
    return r.stdout


def test_replay_on_a_terminal_is_a_line_per_coup_and_json_when_asked_or_piped() -> None:
    piped = [json.loads(line) for line in _piped("replay", str(SAMPLE)).splitlines()]
    results = [e for e in piped if e["type"] == "coup.result"]
    code, out = on_a_terminal([str(SCRIPT), "replay", str(SAMPLE), "--no-progress"])
    assert code == 0
    lines = out.splitlines()
    assert not any(line.startswith("{") for line in lines), lines[:5]
    assert len([line for line in lines if line.startswith("coup ") and "Player " in line]) == len(results)
    first = results[0]
    want = f"coup   1  Player {' '.join(first['player']['cards'])} = {first['player']['total']}"
    assert any(line.startswith(want) for line in lines), (want, lines[:6])
    code, out = on_a_terminal([str(SCRIPT), "replay", str(SAMPLE), "--no-progress", "--json"])
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == piped


def _cells(block: list[str]) -> list[str]:
    return [row[1:-1] for row in block]


def test_roads_on_a_terminal_are_drawn_and_json_when_asked_or_piped() -> None:
    roads = json.loads(_piped("roads", str(SAMPLE)))
    env = {**os.environ, "NO_COLOR": "1"}
    code, out = on_a_terminal([str(SCRIPT), "roads", str(SAMPLE)], env=env)
    assert code == 0 and "{" not in out
    lines = out.splitlines()
    assert lines[0].startswith("shoe ") and lines[0].endswith(" coups")
    at = lines.index("bead plate")
    bead = _cells(lines[at + 1 : at + 7])
    # the bead plate drawn is the JSON's, column by column, 6 rows
    drawn = [bead[r][c] for c in range(len(bead[0])) for r in range(6) if bead[r][c] != " "]
    assert drawn == [cell["w"] for col in roads["bead_plate"] for cell in col]
    for name in ("big road", "big eye boy", "small road", "cockroach pig"):
        assert any(line.startswith(name) for line in lines), name
    assert "\x1b[" not in out  # NO_COLOR
    # colours unless NO_COLOR is set to something (empty counts as unset)
    code, coloured = on_a_terminal([str(SCRIPT), "roads", str(SAMPLE)], env={**os.environ, "NO_COLOR": ""})
    assert code == 0 and "\x1b[31mB\x1b[0m" in coloured and "\x1b[34mP\x1b[0m" in coloured
    code, out = on_a_terminal([str(SCRIPT), "roads", str(SAMPLE), "--json"])
    assert code == 0 and json.loads(out) == roads


def test_archive_stats_and_backfill_speak_sentences_on_a_terminal(tmp_path: Path, pg_dsn: str) -> None:
    import yaml

    from controller.journal import Journal
    from controller.replay import ReplayOptions, replay_events

    events: list[dict[str, Any]] = list(replay_events(SAMPLE, ReplayOptions()))
    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        j.append_events(events)
    cfg = tmp_path / "archive.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "broker": {"host": "127.0.0.1", "port": 1, "client_id": "archive-t"},
                "dsn": pg_dsn,
                "retention_months": 1200,  # the sample's events are from 2025
            }
        )
    )
    assert (
        subprocess.run([str(SCRIPT), "archive", "-c", str(cfg), "--migrate"], capture_output=True).returncode
        == 0
    )
    code, out = on_a_terminal([str(SCRIPT), "archive", "-c", str(cfg), "--backfill", str(path)])
    n = f"{len(events):,}"
    assert (code, out) == (
        0,
        f"{path}: {n} events read: {n} archived, 0 already there, 0 conflicts, 0 set aside\n",
    )
    code, out = on_a_terminal([str(SCRIPT), "archive", "-c", str(cfg), "--stats"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"archive: {n} events, 0 conflicts, 0 set aside (rejects); replayed apart: 0 events, 0 conflicts"
    ), lines
    assert lines[1] == f"  archiver archive-t/backfill: received {n}, archived {n}", lines
    code, out = on_a_terminal([str(SCRIPT), "archive", "-c", str(cfg), "--stats", "--json"])
    assert code == 0 and json.loads(out)["events"] == len(events)
    assert json.loads(_piped("archive", "-c", str(cfg), "--stats"))["events"] == len(events)
