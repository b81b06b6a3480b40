"""The live path's shortcuts change no event.

A coup's roads and odds are computed ahead while the table is idle
(``analytics.prepare``: ``prepare_roads``, and ``prepare_odds`` into
``OddsCalculator.prepare``); a coup's end
is made durable by a sync thread while the loop goes on
(``Journal.append_input(durable=False)`` + ``Journal.sync``), with its
analytics computed and stored meanwhile, in that fsync's shadow. These tests
pin that the events are the same, byte for byte, and that nothing held for
its fsync reaches an output before it. No timings here: those are in
``benchmarks/bench_latency.py``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from controller.config import load_config
from controller.daemon import Daemon
from controller.engine import Engine, analytics
from controller.events import dumps
from controller.journal import Journal
from controller.odds import OddsCalculator, rank_counts
from controller.replay import ReplayOptions, replay_events
from controller.rules import load_profile
from controller.shoelog import device_reads
from firmware_protocols.detect import make_decoder
from tests.support.configs import write_config
from tests.support.signed import unsigned
from tests.test_journal import event

CAPTURE = Path(__file__).parent / "captures" / "profile_punto_banco.shoelog"


def _engine() -> Engine:
    return Engine("T01", load_profile("punto_banco"), 8, odds=True, roads=True, defer_analytics=True)


def _frames(seed: int = 11, n: int = 1500) -> list[Any]:
    from drivers.fake import FakeShoe

    dec = make_decoder("shoe-ascii/1")
    out: list[Any] = []
    for t, data in FakeShoe(seed=seed, cards_per_second=100).stream():
        out.extend(dec.feed(t, data))
        if len(out) >= n:
            break
    return out


def _streams(prepare: Any, settling: list[int] | None = None) -> tuple[list[str], list[str], int]:
    """The events of one engine fed the frames, and of another that also
    calls ``prepare`` between two frames, as the daemon does between two
    reads; and how many steps ``prepare`` did. ``settling[0]`` is 1 while
    the second engine settles (``_settling_calls``)."""
    plain, ahead = _engine(), _engine()
    a: list[str] = []
    b: list[str] = []
    prepared = 0
    counting = settling if settling is not None else [0]
    for f in _frames():
        a += [dumps(e) for e in plain.feed(f) + plain.drain_analytics()]
        counting[0] = 1
        b += [dumps(e) for e in ahead.feed(f) + ahead.drain_analytics()]
        counting[0] = 0
        while prepare(ahead):
            prepared += 1
    return a, b, prepared


def test_odds_prepared_while_idle_are_the_odds_computed_on_settling() -> None:
    a, b, prepared = _streams(analytics.prepare_odds)
    assert a == b
    assert sum('"odds.update"' in line for line in a) > 20
    assert prepared > 20  # it did compute ahead (two views a coup at most)


def _settling_calls(monkeypatch: Any) -> list[int]:
    """Counts ``roads.build_roads`` calls; the test says when it counts."""
    from controller import roads

    calls = [0, 0]  # [counting?, calls]
    real = roads.build_roads

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[1] += calls[0]
        return real(*args, **kwargs)

    monkeypatch.setattr(roads, "build_roads", counted)
    return calls


def test_roads_prepared_while_idle_are_the_roads_computed_on_settling(monkeypatch: Any) -> None:
    calls = _settling_calls(monkeypatch)
    a, b, prepared = _streams(analytics.prepare, settling=calls)  # counted: roads built on settling
    assert a == b
    roads_events = sum('"type":"roads"' in line for line in b)
    assert roads_events > 20
    assert prepared > roads_events  # roads and odds, ahead of every coup
    assert calls[1] == 0  # every coup's roads were those prepared


def _prepared_engine_before_result() -> tuple[Engine, Engine, Any]:
    """Two engines fed up to a coup's RESULT (one of them has prepared its
    roads), and that RESULT."""
    plain, ahead = _engine(), _engine()
    frames = _frames()
    for i, f in enumerate(frames):
        plain.feed(f)
        plain.drain_analytics()
        ahead.feed(f)
        ahead.drain_analytics()
        while analytics.prepare(ahead):
            pass
        nxt = frames[i + 1]
        if ahead._roads_ahead is not None and getattr(nxt, "name", None) == "RESULT" and i > 200:
            return plain, ahead, nxt
    raise AssertionError("no RESULT with roads prepared")


def test_roads_prepared_for_other_results_are_not_used() -> None:
    plain, ahead, result = _prepared_engine_before_result()
    prepared = ahead._roads_ahead
    assert prepared is not None
    wrong = [dict(r) for r in prepared.results]
    last = wrong[-1]
    last["winner"] = "tie" if last["winner"] != "tie" else "banker"  # a guess the coup will not settle with
    empty = {"bead_plate": [], "big_road": [], "big_eye_boy": [], "small_road": [], "cockroach_pig": []}
    ahead._roads_ahead = prepared._replace(results=wrong, roads=empty)
    got = [dumps(e) for e in ahead.feed(result) + ahead.drain_analytics()]
    assert got == [dumps(e) for e in plain.feed(result) + plain.drain_analytics()]
    assert any('"type":"roads","' in line and '"bead_plate":[[' in line for line in got)
    assert ahead._roads_ahead is None  # used up either way


def test_roads_prepared_for_these_results_are_the_ones_published() -> None:
    _, ahead, result = _prepared_engine_before_result()
    prepared = ahead._roads_ahead
    assert prepared is not None
    marked = {**prepared.roads, "bead_plate": [[{"w": "T", "pp": True, "bp": True}]]}
    ahead._roads_ahead = prepared._replace(roads=marked)  # type: ignore[arg-type]
    got = [e for e in ahead.feed(result) + ahead.drain_analytics() if e["type"] == "roads"]
    assert [e["bead_plate"] for e in got] == [[[{"w": "T", "pp": True, "bp": True}]]]


def test_prepare_keeps_the_exact_result_and_compute_hands_out_copies() -> None:
    calc = OddsCalculator.for_profile(load_profile("ez_baccarat"))
    counts = rank_counts(8, ["AS", "KD", "7H", "7C", "2S"])
    fresh = OddsCalculator.for_profile(load_profile("ez_baccarat")).compute(counts)
    assert calc.prepare(counts) is True
    assert calc.prepare(counts) is False  # already kept
    got = calc.compute(counts)
    assert got == fresh
    got.bets.clear()
    got.outcomes.clear()
    assert calc.compute(counts) == fresh  # what it keeps is not the caller's to change


def test_an_input_stored_without_its_fsync_reaches_no_output_until_synced(tmp_path: Path) -> None:
    with Journal(tmp_path / "journal.sqlite3") as j:
        j.claim("T01")
        j.append_input(1.0, "rx", b"a", [event(1)])
        j.append_input(2.0, "rx", b"b", [event(2), event(3)], durable=False)
        j.append_events([event(4, "roads")], durable=False)  # its analytics, stored after it
        assert [p.seq for p in j.pending("out", 10)] == [1]
        assert [p.seq for p in j.events_since(0)] == [1, 2, 3, 4]  # stored all the same
        point = j.sync_point()
        j.append_input(3.0, "rx", b"c", [event(5)], durable=False)  # after the point: still held
        j.sync(point)
        assert [p.seq for p in j.pending("out", 10)] == [1, 2, 3, 4]
        j.sync()
        assert [p.seq for p in j.pending("out", 10)] == [1, 2, 3, 4, 5]
        # a durable commit covers whatever was held before it
        j.append_input(4.0, "rx", b"d", [event(6)], durable=False)
        j.append_input(5.0, "rx", b"e", [event(7)])
        assert [p.seq for p in j.pending("out", 10, after=5)] == [6, 7]


class _Pausing:
    """The capture's reads with the device silent between two of them (the
    daemon's idle work and its waits for fsyncs run), then the end."""

    def __init__(self, path: Path) -> None:
        self._reads = iter(device_reads(path))
        self._silent = 0
        self.eof = False

    def open(self) -> None:
        pass

    def read(self, timeout: float) -> tuple[float, bytes] | None:
        if self._silent:
            self._silent -= 1
            return None
        self._silent = 3
        item = next(self._reads, None)
        if item is None:
            self.eof = True
        return item

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_live_loop_with_its_idle_work_stores_and_outputs_what_replay_emits(tmp_path: Path) -> None:
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": True}
        )
    )
    out = io.StringIO()
    daemon = Daemon(cfg, driver=_Pausing(CAPTURE), stdout=out, stop_at_eof=True)
    assert daemon.run() == 0
    want = [dumps(e) for e in replay_events(CAPTURE, ReplayOptions(odds=True, roads=True))]
    assert unsigned(out.getvalue()).splitlines() == want  # the daemon signs
    assert sum('"odds.update"' in line for line in want) >= 8
