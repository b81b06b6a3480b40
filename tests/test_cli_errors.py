"""Expected errors as a new user meets them: each is
run through the installed ``shoe-controller`` console script, and must end
with one line on stderr, no traceback, and the documented exit code (2 usage or
configuration, 1 runtime)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

CAPTURES = Path(__file__).parent / "captures"
SCRIPT = Path(sys.executable).with_name("shoe-controller")


def cli(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"the console script is not installed next to {sys.executable}"
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )


def one_line_error(r: subprocess.CompletedProcess[str], code: int) -> str:
    """The single stderr line of a command that failed with ``code``."""
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# --- metrics port -----------------------------------------------------------


def test_a_metrics_port_in_use_is_one_line_before_the_journal_or_device_is_touched(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        journal = tmp_path / "journal.sqlite3"
        config = tmp_path / "config.yaml"
        config.write_text(
            "table: T01\n"
            "device: {driver: fake, cards_per_second: 0}\n"
            f"journal: {journal}\n"
            f"metrics: 127.0.0.1:{port}\n"
            "outputs: {stdout: false}\n"
        )
        r = cli("run", "-c", str(config))
    line = one_line_error(r, 1)
    assert line.startswith("shoe-controller run: metrics: cannot listen on 127.0.0.1:"), line
    assert "in use" in line, line
    assert not journal.exists(), "the daemon started before finding the metrics port taken"
    assert r.stdout == ""


def test_a_second_daemon_on_the_same_journal_is_told_the_journal_not_the_metrics_port(
    tmp_path: Path,
) -> None:
    """Two daemons started on one config: the second is told what it shares
    with the first (the journal), not the first clash it meets (the port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    journal = tmp_path / "journal.sqlite3"
    config = tmp_path / "config.yaml"
    config.write_text(
        "table: T01\n"
        "device: {driver: fake, cards_per_second: 1}\n"
        f"journal: {journal}\n"
        f"metrics: 127.0.0.1:{port}\n"
        "outputs: {stdout: false}\n"
    )
    first = subprocess.Popen([str(SCRIPT), "run", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    try:
        # the first holds the journal and the port once it answers a scrape
        def serving() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                    return s.recv(12).startswith(b"HTTP/1.")
            except OSError:
                return False

        deadline = time.monotonic() + 60
        while not serving():
            assert first.poll() is None and time.monotonic() < deadline, "the first daemon did not start"
            time.sleep(0.1)
        # (the daemon's log, JSON lines when stderr is not a terminal)
        entry = json.loads(one_line_error(cli("run", "-c", str(config)), 1))
        assert entry["error"] == (
            f"another shoe-controller process is using this journal ({journal}.hwm is locked)"
        ), entry
        assert "metrics" not in json.dumps(entry)
    finally:
        first.terminate()
        first.wait(30)


# --- captures that cannot be read -------------------------------------------


@pytest.mark.parametrize("command", ["replay", "roads"])
def test_a_capture_that_is_not_utf8_is_one_line_naming_the_line(tmp_path: Path, command: str) -> None:
    capture = tmp_path / "latin1.shoelog"
    capture.write_bytes(b"# protocol=shoe-ascii/1\n1763800000.000 < $SH,0,HELLO,FAKE\xe9-1*7E\n")
    line = one_line_error(cli(command, str(capture)), 2)
    assert line == (
        f"shoe-controller {command}: {capture}:2: not UTF-8 text (invalid continuation byte "
        "at column 34); a capture is text: write raw bytes as hex:"
    )


@pytest.mark.parametrize("command", ["replay", "roads"])
def test_a_directory_given_as_a_capture_is_named_a_directory(tmp_path: Path, command: str) -> None:
    line = one_line_error(cli(command, str(tmp_path)), 2)
    assert line == f"shoe-controller {command}: {tmp_path}: is a directory, not a capture file"


def test_replay_checks_every_file_before_writing_an_event(tmp_path: Path) -> None:
    r = cli("replay", str(CAPTURES / "profile_punto_banco.shoelog"), str(tmp_path / "missing.shoelog"))
    assert one_line_error(r, 2).endswith("missing.shoelog: no such file")
    assert r.stdout == ""


def test_a_capture_line_that_is_not_a_record_says_what_a_record_is(tmp_path: Path) -> None:
    capture = tmp_path / "typo.shoelog"
    capture.write_text("# protocol=shoe-ascii/1\n1763800000.000<$SH,0,HELLO,FAKE-1,1.0,000001*7E\n")
    line = one_line_error(cli("replay", str(capture)), 2)
    assert line == f"shoe-controller replay: {capture}:2: expected '<seconds> <direction> <payload>'"


# --- the fake shoe's pace ---------------------------------------------------


@pytest.mark.parametrize("pace", ["nan", "inf", "-inf", "-1", "10000.5", "1e9"])
def test_fake_refuses_a_pace_outside_0_to_10000_cards_a_second(pace: str) -> None:
    line = one_line_error(cli("fake", f"--cards-per-second={pace}", "--shoes", "1"), 2)
    assert line.startswith(
        "shoe-controller fake: --cards-per-second: cards per second must be 0 (as fast as possible) to 10000,"
    ), line


def test_fake_deals_at_the_fastest_pace_it_takes() -> None:
    r = cli("fake", "--cards-per-second", "10000", "--shoes", "1", "--decks", "1", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("CARD") > 40


@pytest.mark.parametrize("pace", [".nan", ".inf", "-1", "10001"])
def test_a_config_refuses_a_fake_pace_outside_the_range(tmp_path: Path, pace: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"table: T01\ndevice: {{driver: fake, cards_per_second: {pace}}}\n")
    line = one_line_error(cli("check-config", str(config)), 2)
    assert f"{config}: device.cards_per_second:" in line, line


# --- odds of a shoe too short -----------------------------------------------


def _all_but(*keep: str) -> str:
    return ",".join(r + s for r in "A23456789TJQK" for s in "SHDC" if r + s not in keep)


def test_odds_with_fewer_cards_than_any_coup_needs_is_a_usage_error() -> None:
    line = one_line_error(cli("odds", "--decks", "1", "--remove", _all_but("2S", "3S", "4S")), 2)
    assert line == (
        "shoe-controller odds: --remove leaves 3 cards: every coup needs at least 4 "
        "(two for each hand), so no bet can be settled"
    )


def test_odds_with_five_cards_says_how_often_a_coup_cannot_finish() -> None:
    r = cli("odds", "--decks", "1", "--remove", _all_but("2S", "3S", "4S", "5S", "6S"))
    assert r.returncode == 0, r.stderr
    assert "cannot finish     13.3333%" in r.stdout
    assert "With 5 cards left, a coup that needs a sixth card cannot be completed" in r.stdout
    # and a pair bet is not settled on a coup that cannot finish either
    assert "player_pair        0.0000%     0.0000%    86.6667%" in r.stdout
    r = cli("odds", "--decks", "1", "--remove", _all_but("2S", "3S", "4S", "5S", "6S"), "--json")
    doc = json.loads(r.stdout)
    assert doc["exact"]["incomplete"] == "2/15"
    for bet in doc["exact"]["bets"].values():
        assert Fraction(bet["win"]) + Fraction(bet["push"]) + Fraction(bet["lose"]) == Fraction(13, 15)


# --- table ids and capture headers ------------------------------------------

PB = CAPTURES / "profile_punto_banco.shoelog"


def _with_header(tmp_path: Path, header: str) -> Path:
    """The punto banco capture under another first line."""
    capture = tmp_path / "capture.shoelog"
    lines = PB.read_text().splitlines(keepends=True)
    capture.write_text(header + "\n" + "".join(lines[1:]))
    return capture


@pytest.mark.parametrize("table", ["T/01", "T+", "#", "", "x" * 33, "T 1"])
def test_replay_table_must_be_a_safe_topic_level(table: str) -> None:
    r = cli("replay", str(PB), f"--table={table}")
    line = one_line_error(r, 2)
    assert line == (
        "shoe-controller replay: --table must be 1 to 32 of A-Z a-z 0-9 _ - "
        f"(an MQTT topic level and part of every event_id), not {table!r}"
    )
    assert r.stdout == ""


@pytest.mark.parametrize("command", ["replay", "roads"])
@pytest.mark.parametrize("table", ["T/01", "a+b", "T#", ""])
def test_a_capture_table_must_be_a_safe_topic_level(tmp_path: Path, command: str, table: str) -> None:
    capture = _with_header(tmp_path, f"# protocol=shoe-ascii/1 table={table}")
    line = one_line_error(cli(command, str(capture)), 2)
    assert line.startswith(f"shoe-controller {command}: {capture}: '# table=' must be 1 to 32 of"), line
    assert line.endswith(f"not {table!r}"), line


def test_table_on_the_command_line_overrides_a_bad_one_in_the_capture(tmp_path: Path) -> None:
    capture = _with_header(tmp_path, "# protocol=shoe-ascii/1 table=T/01")
    r = cli("replay", str(capture), "--table", "T09")
    assert r.returncode == 0, r.stderr
    assert {json.loads(line)["table"] for line in r.stdout.splitlines()} == {"T09"}


@pytest.mark.parametrize(
    ("header", "hint"),
    [
        ("# protocol=shoe-ascii/1 tabel=T01", "unknown key 'tabel' (did you mean 'table'?)"),
        ("# protocl=shoe-ascii/1", "unknown key 'protocl' (did you mean 'protocol'?)"),
        ("# protocol=shoe-ascii/1 cut_card=14", "unknown key 'cut_card' (did you mean 'cut_card_min'?)"),
        (
            "# protocol=shoe-ascii/1 zzz=1",
            "unknown key 'zzz' (allowed: protocol, table, profile, decks, burn, cut_card_min, "
            "after_cut, coup_boundary, demo_coups, correction_deadline_s, extra_card)",
        ),
    ],
)
def test_an_unknown_capture_header_key_is_named_with_a_suggestion(
    tmp_path: Path, header: str, hint: str
) -> None:
    capture = _with_header(tmp_path, header)
    assert one_line_error(cli("replay", str(capture)), 2) == f"shoe-controller replay: {capture}:1: {hint}"


def test_a_comment_line_without_key_value_pairs_is_still_a_comment(tmp_path: Path) -> None:
    capture = _with_header(tmp_path, "# protocol=shoe-ascii/1 table=T01\n# recorded at table 1: dealer A")
    r = cli("replay", str(capture))
    assert r.returncode == 0, r.stderr


# --- the replay summary -----------------------------------------------------


def test_the_replay_summary_counts_repeated_copies_apart_from_records_and_drops(tmp_path: Path) -> None:
    """A shoe that sends every message three times (as Angel Eye does):
    its copies were shown as 'dropped: duplicate=56' beside '28 records',
    as if twice the file had been lost."""
    lines = PB.read_text().splitlines(keepends=True)
    tripled = tmp_path / "tripled.shoelog"
    # the HELLO restarts the sequence, so only its first copy counts as a frame
    tripled.write_text(lines[0] + "".join(line * 3 for line in lines[1:] if not line.startswith("#")))
    r = cli("replay", str(tripled))
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"replay: {tripled}: 84 records (1662 bytes); 30 frames decoded; "
        "54 repeated copies skipped (the same frame sent again); dropped: nothing"
    ]


def test_the_replay_summary_gives_each_drop_its_unit() -> None:
    r = cli("replay", str(CAPTURES / "line_garbage.shoelog"), str(CAPTURES / "line_bad_checksum.shoelog"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"replay: {CAPTURES / 'line_garbage.shoelog'}: 15 records (254 bytes); 11 frames decoded; "
        "dropped: 26 bytes of garbage, 1 truncated frame",
        f"replay: {CAPTURES / 'line_bad_checksum.shoelog'}: 12 records (241 bytes); 12 frames decoded; "
        "1 sequence gap; dropped: 1 frame with a bad checksum",
    ]


def test_a_counter_the_summary_does_not_know_is_shown_by_name() -> None:
    from controller.replay import ReplayStats, summary

    stats = ReplayStats(records=1, bytes=7, frames=0)
    stats.dropped.update({"new_reason": 2, "duplicate": 1})
    assert summary("f", stats) == (
        "replay: f: 1 record (7 bytes); 0 frames decoded; 1 repeated copy skipped "
        "(the same frame sent again); dropped: new_reason=2"
    )


# --- record on a device that cannot be opened --------------------------------


def test_record_on_a_port_that_cannot_be_opened_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    port = tmp_path / "ttyUSB-missing"
    config = tmp_path / "config.yaml"
    config.write_text(f"table: T01\ndevice: {{driver: serial, port: {port}}}\n")
    out = tmp_path / "session.shoelog"
    line = one_line_error(cli("record", "-c", str(config), "-o", str(out), timeout=30), 1)
    assert line.startswith("shoe-controller record: ") and str(port) in line, line
    assert line.endswith("; nothing recorded"), line
    assert not out.exists()


def test_record_on_a_file_that_is_no_serial_port_exits_1(tmp_path: Path) -> None:
    not_a_tty = tmp_path / "notes.txt"
    not_a_tty.write_text("hello\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"table: T01\ndevice: {{driver: serial, port: {not_a_tty}}}\n")
    line = one_line_error(cli("record", "-c", str(config), "-o", str(tmp_path / "o.shoelog"), timeout=30), 1)
    assert line.startswith("shoe-controller record: ") and str(not_a_tty) in line, line
    assert line.endswith("; nothing recorded"), line


def test_the_docs_command_table_has_a_row_for_every_command() -> None:
    """The "Command line" table of docs/operations.md: one row per
    subcommand of the CLI (archive and report included), each saying what
    it does."""
    import argparse
    import re

    from controller.cli import _build_parser

    (sub,) = [a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    page = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    table = page.split("\n## Command line\n\n", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `shoe-controller ([a-z-]+)[^`]*` \| (.+) \|$", table, re.MULTILINE)
    documented = {name for name, does in rows if len(does) > 20}
    assert set(sub.choices) <= documented, sorted(set(sub.choices) - documented)
    assert {"archive", "report"} <= documented


def test_every_option_and_argument_of_every_command_has_help_text() -> None:
    """``-h`` says what each option does: none is listed bare."""
    import argparse

    from controller.cli import _build_parser

    bare: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not action.help:
                bare.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(_build_parser(), "shoe-controller")
    assert bare == []
