"""Replay: whole shoes, any chunking of the bytes, the command line."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_replay import make_capture
from controller.events import dumps
from controller.replay import ReplayStats, replay_events
from controller.shoelog import ShoelogError, ShoelogWriter
from drivers.fake import FakeShoe


def _write(path: Path, chunks: list[tuple[float, bytes]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T07"})
        for t, data in chunks:
            w.write(t, "<", data)


def _rechunk(chunks: list[tuple[float, bytes]], rng: random.Random) -> list[tuple[float, bytes]]:
    """The same bytes cut at random places; each piece keeps the time of
    the chunk its last byte came from."""
    stream = b"".join(d for _, d in chunks)
    owner: list[float] = []
    for t, d in chunks:
        owner.extend([t] * len(d))
    out = []
    i = 0
    while i < len(stream):
        n = rng.randint(1, 40)
        out.append((owner[min(i + n, len(stream)) - 1], stream[i : i + n]))
        i += n
    return out


def test_whole_8_deck_shoe_in_random_chunks_gives_the_same_events(tmp_path: Path) -> None:
    fake = FakeShoe(seed=7, decks=8, shoes=1, cards_per_second=4)
    chunks = list(fake.stream())
    whole = tmp_path / "whole.shoelog"
    _write(whole, chunks)
    want = [dumps(e) for e in replay_events(whole)]
    results = [e for e in map(eval_json, want) if e["type"] == "coup.result"]
    assert len(results) == len(fake.coups) > 60

    # A frame is stamped with the read time of the chunk that completed it,
    # so cutting the bytes elsewhere legitimately moves ``ts``; everything
    # else, ids included, must be identical.
    def without_ts(lines: list[str]) -> list[dict]:  # type: ignore[type-arg]
        return [{k: v for k, v in eval_json(x).items() if k != "ts"} for x in lines]

    for seed in range(3):
        split = tmp_path / f"split{seed}.shoelog"
        _write(split, _rechunk(chunks, random.Random(seed)))
        got = [dumps(e) for e in replay_events(split)]
        assert without_ts(got) == without_ts(want)
        stamps = [eval_json(x)["ts"] for x in got]
        assert stamps == sorted(stamps)


def eval_json(line: str) -> dict:  # type: ignore[type-arg]
    import json

    return json.loads(line)  # type: ignore[no-any-return]


def test_fake_shoes_record_matches_the_engines_results(tmp_path: Path) -> None:
    fake = FakeShoe(seed=11, decks=8, shoes=2, cards_per_second=2)
    path = tmp_path / "two.shoelog"
    _write(path, list(fake.stream()))
    results = [e for e in replay_events(path) if e["type"] == "coup.result"]
    assert [(r["player"]["cards"], r["banker"]["cards"], r["winner"]) for r in results] == [
        (c["player"], c["banker"], c["winner"]) for c in fake.coups
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_replay_prints_json_lines_and_is_byte_identical(tmp_path: Path) -> None:
    capture = Path(__file__).parent / "captures" / "profile_ez_baccarat.shoelog"
    a = _cli("replay", str(capture))
    b = _cli("replay", str(capture))
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stdout.count("\n") > 10
    assert "\r" not in a.stderr, "no progress bar when stderr is not a terminal"


def test_cli_replay_flags_override_the_capture_header(tmp_path: Path) -> None:
    capture = Path(__file__).parent / "captures" / "profile_ez_baccarat.shoelog"
    out = _cli("replay", str(capture), "--profile", "punto_banco", "--table", "T99").stdout
    assert '"profile":"punto_banco"' in out and '"table":"T99"' in out


def test_cli_replay_errors_are_messages_with_exit_codes(tmp_path: Path) -> None:
    r = _cli("replay", str(tmp_path / "missing.shoelog"))
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.shoelog"
    bad.write_text("1.0 < $SH,0,HELLO,a,b,c*00\nnot a record\n")
    r = _cli("replay", str(bad))
    assert r.returncode == 2 and "bad.shoelog:2" in r.stderr and "Traceback" not in r.stderr
    r = _cli("replay", str(bad), "--profile", "baccarat_99")
    assert r.returncode == 2 and "baccarat_99" in r.stderr
    r = _cli("replay", str(bad), "--decks", "13")
    assert r.returncode == 2 and "decks" in r.stderr


def test_replay_of_a_capture_with_a_bad_line_yields_what_precedes_it(tmp_path: Path) -> None:
    """A bad line is raised after the events (and counts) of the records
    before it, as the record-by-record reading (``on_record``) gives them."""
    path = tmp_path / "bad.shoelog"
    make_capture(path, shoes=1)
    lines = path.read_text().splitlines()
    lines[200] = "1763800000.5 < hex:abc"  # odd hex digits
    path.write_text("\n".join(lines) + "\n")
    results = []
    for on_record in (None, lambda r: None):
        stats = ReplayStats()
        events: list[Any] = []
        with pytest.raises(ShoelogError, match=r"bad\.shoelog:201: bad hex payload") as err:
            events.extend(replay_events(path, stats=stats, on_record=on_record))
        results.append((events, stats, str(err.value)))
    assert results[0] == results[1]
    assert results[0][1].records == 199 and results[0][0]
