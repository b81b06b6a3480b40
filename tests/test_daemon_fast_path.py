"""The fast path: a card's events are committed and
published before the analytics (roads, odds) of the input before it.

The engine queues its analytics under ``defer_analytics`` and emits them on
``drain_analytics``; the daemon commits an input's own events, delivers
them, then drains and commits the analytics. These tests pin the order this
gives (the same live, rebuilt and replayed) and that a crash between the two
commits loses nothing: the restart stores the analytics under the same seqs.
No timings here: those are in ``benchmarks/bench_latency.py``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from controller import signing
from controller.config import load_config
from controller.daemon import Daemon
from controller.engine import Engine
from controller.events import dumps
from controller.journal import Journal
from controller.replay import ReplayOptions, replay_events
from controller.rules import load_profile
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Link
from tests.support.configs import write_config
from tests.support.signed import unsigned, unsigned_line

CAPTURE = Path(__file__).parent / "captures" / "profile_punto_banco.shoelog"
ANALYTICS = ("roads", "odds.update")


def _engine(*, defer: bool) -> Engine:
    return Engine("T01", load_profile("punto_banco"), 8, odds=True, roads=True, defer_analytics=defer)


def _dealt(seed: int = 7, n: int = 2500) -> list[Any]:
    """``n`` frames of the fake shoe (a whole 8-deck shoe and the next one's
    start, with faults), decoded."""
    from drivers.fake import FakeShoe

    dec = make_decoder("shoe-ascii/1")
    out: list[Any] = []
    for t, data in FakeShoe(seed=seed, cards_per_second=100).stream():
        out.extend(dec.feed(t, data))
        if len(out) >= n:
            return out
    return out


def _decode_capture() -> list[Any]:
    """The capture's frames, decoded as ``replay`` decodes them."""
    from controller.shoelog import Record, read_shoelog

    dec = make_decoder("shoe-ascii/1")
    out: list[Any] = []
    for rec in read_shoelog(CAPTURE):
        if isinstance(rec, Record) and rec.direction == "<":
            out.extend(dec.feed(rec.t, rec.data))
    return out


def _analytic(e: dict[str, Any]) -> bool:
    """Roads, odds and the ADVANTAGE alerts the odds raise."""
    return e["type"] in ANALYTICS or (e["type"] == "security.alert" and e["code"] == "ADVANTAGE")


def _strip(e: dict[str, Any]) -> dict[str, Any]:
    """An event without what depends on its place in the stream."""
    return {k: v for k, v in e.items() if k not in ("seq", "event_id")}


def test_deferred_analytics_follow_the_frames_events_and_are_the_same_events() -> None:
    now, later = _engine(defer=False), _engine(defer=True)
    eager: list[list[dict[str, Any]]] = []
    deferred: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    for f in _dealt():
        eager.append(now.feed(f))
        deferred.append((later.feed(f), later.drain_analytics()))
    settled = 0
    for got, (urgent, analytics) in zip(eager, deferred, strict=True):
        # the feed's own events carry no analytics; the drain nothing else
        assert not [e for e in urgent if _analytic(e)]
        assert all(_analytic(e) for e in analytics)
        # the same events as computed in place, the analytics moved after
        # the frame's other events (in the order they were queued)
        assert [_strip(e) for e in urgent + analytics] == [_strip(e) for e in got if not _analytic(e)] + [
            _strip(e) for e in got if _analytic(e)
        ]
        # and the seqs run on: the analytics' follow the frame's events
        seqs = [e["seq"] for e in urgent + analytics]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        if seqs:
            assert seqs[-1] - seqs[0] == len(seqs) - 1
        if any(e["type"] == "coup.result" for e in urgent):
            settled += 1
            # roads, then the next coup's odds in two views (none after the
            # last coup), then any ADVANTAGE alert
            assert [e["type"] for e in analytics][:3] in (["roads", "odds.update", "odds.update"], ["roads"])
    assert settled > 10  # the capture settles coups: the check above ran


def test_not_draining_gives_the_same_stream_as_draining_after_every_frame() -> None:
    """The order is a function of the inputs alone: a caller that drains late
    gets the analytics at the start of the next call's events."""
    drained, lazy = _engine(defer=True), _engine(defer=True)
    a: list[dict[str, Any]] = []
    b: list[dict[str, Any]] = []
    frames = _dealt()
    for i, f in enumerate(frames):
        a += drained.feed(f) + drained.drain_analytics()
        b += lazy.feed(f)
        if i % 7 == 0:  # ticks and commands drain what the frame before queued too
            b += lazy.tick(f.t)
            a += drained.tick(f.t) + drained.drain_analytics()
    b += lazy.drain_analytics()
    assert [dumps(e) for e in a] == [dumps(e) for e in b]
    assert any(e["type"] == "odds.update" for e in a)


def test_a_checkpoint_refuses_an_engine_with_analytics_not_drained() -> None:
    from controller import checkpoint

    engine = _engine(defer=True)
    dec = make_decoder("shoe-ascii/1")
    for f in _decode_capture():
        engine.feed(f)
        if f.__class__.__name__ == "Button" and getattr(f, "name", "") == "RESULT":
            break
    with pytest.raises(ValueError, match="not drained"):
        checkpoint.dump(0, engine, dec)
    engine.drain_analytics()
    assert json.loads(checkpoint.dump(0, engine, dec))["version"] == checkpoint.VERSION


def _reference(journal_path: Path) -> list[dict[str, Any]]:
    """A fresh deferring engine fed every input the journal holds, drained
    after each: what an uninterrupted daemon stores."""
    engine = Engine("T01", load_profile("punto_banco"), 8, odds=True, roads=True, defer_analytics=True)
    decoder = make_decoder("shoe-ascii/1")
    out: list[dict[str, Any]] = []
    with Journal(journal_path) as j:
        for rec in j.inputs_since(0):
            if rec.kind == "rx":
                for f in decoder.feed(rec.t, rec.data):
                    out += engine.feed(f) + engine.drain_analytics()
            elif rec.kind == "link":
                out += engine.feed(Link(rec.t, None, rec.data[:1] == b"1", rec.data[1:].decode()))
            elif rec.kind == "tick":
                out += engine.tick(rec.t)
            elif rec.kind == "cmd":
                out += engine.command(json.loads(rec.data), rec.t)[1]
            out += engine.drain_analytics()
    return [json.loads(dumps(e)) for e in out]


def _stored(journal_path: Path) -> list[dict[str, Any]]:
    """The journal's events as the engine made them (signing's fields out)."""
    with Journal(journal_path) as j:
        return [json.loads(unsigned_line(p.json)) for p in j.events_since(0)]


def _chained(journal_path: Path) -> int:
    """Every event signed and chained to the one before it."""
    ring = signing.KeyRing()
    ring.add(signing.Signer(signing.load_key(journal_path.parent / "signing.key")).public_key)
    check = signing.ChainCheck(ring, anchored=False)
    with Journal(journal_path) as j:
        for p in j.events_since(0):
            assert check.feed(f"seq {p.seq}", p.json.encode()) is None
    return check.signed


class _Killed(BaseException):
    """The daemon dies here (not an error it could handle)."""


class _DiesBetweenCommits(Daemon):
    """Dies after the ``n``-th input with analytics committed its own events
    and before its analytics are stored."""

    def __init__(self, cfg: Any, n: int, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self._left = n

    def _between_commits(self) -> None:
        self._left -= 1
        if self._left == 0:
            raise _Killed


class _Idle:
    """A device that sends nothing more: the restart only rebuilds."""

    eof = True

    def open(self) -> None:
        pass

    def read(self, timeout: float) -> None:
        return None

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_crash_between_the_two_commits_is_made_good_under_the_same_seqs(tmp_path: Path) -> None:
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": False}
        )
    )
    journal = tmp_path / "journal.sqlite3"
    with pytest.raises(_Killed):
        _DiesBetweenCommits(cfg, 3, stop_at_eof=True).run()
    before = _stored(journal)
    # it died with the input's own events stored, its analytics not
    assert before[-1]["type"] == "coup.result", before[-1]["type"]
    reference = _reference(journal)
    cut = len(before)
    assert [e["type"] for e in reference[cut : cut + 3]] == ["roads", "odds.update", "odds.update"]

    out = io.StringIO()
    assert Daemon(cfg, driver=_Idle(), stdout=out, stop_at_eof=True).run() == 0  # type: ignore[arg-type]
    after = _stored(journal)
    assert after[:cut] == before
    # the lost analytics are stored under the seqs and ids they would have had
    assert after == reference
    assert after[cut]["seq"] == before[-1]["seq"] + 1
    assert _chained(journal) == len(after)  # the chain runs on across the crash


def test_the_daemon_with_odds_on_stores_what_replay_emits(tmp_path: Path) -> None:
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": True}
        )
    )
    out = io.StringIO()
    assert Daemon(cfg, stdout=out, stop_at_eof=True).run() == 0
    want = [dumps(e) for e in replay_events(CAPTURE, ReplayOptions(odds=True, roads=True))]
    assert unsigned(out.getvalue()).splitlines() == want
    assert sum(1 for e in want if '"odds.update"' in e) >= 8


def test_a_commit_without_its_own_fsync_is_stored_and_leaves_the_high_water_mark_to_the_next(
    tmp_path: Path,
) -> None:
    from controller.journal import HWM_SUFFIX
    from tests.test_journal import event

    path = tmp_path / "journal.sqlite3"
    hwm = Path(str(path) + HWM_SUFFIX)
    with Journal(path) as j:
        j.claim("T01")
        j.append_input(1.0, "rx", b"x", [event(1)])
        assert json.loads(hwm.read_bytes())["committed"] == 1
        assert j.append_events([event(2), event(3)], durable=False) == [event(2), event(3)]
        j.mark_delivered("mqtt", 3, durable=False)
        # stored and readable at once; the mark's "committed" is not moved by
        # them (a power cut may take them: they must not look like lost history)
        assert [p.seq for p in j.events_since(0)] == [1, 2, 3]
        assert j.mark("mqtt") == 3
        assert json.loads(hwm.read_bytes())["committed"] == 1
        # the connection is back to fsyncing every commit
        assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        j.append_input(2.0, "rx", b"y", [event(4)])
        assert json.loads(hwm.read_bytes())["committed"] == 4
    with Journal(path) as j:
        assert [p.seq for p in j.events_since(0)] == [1, 2, 3, 4]
        assert j.mark("mqtt") == 3


def test_a_clean_stop_after_a_commit_without_fsync_syncs_it_before_the_mark_vouches_for_it(
    tmp_path: Path,
) -> None:
    from controller.journal import HWM_SUFFIX
    from tests.test_journal import event

    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        j.claim("T01")
        j.append_input(1.0, "rx", b"x", [event(1)])
        j.append_events([event(2)], durable=False)
        assert j._unsynced
        j.append_events([event(2)])  # already stored: writes nothing, syncs nothing
        assert j._unsynced
    mark = json.loads(Path(str(path) + HWM_SUFFIX).read_bytes())
    assert (mark["committed"], mark["clean"]) == (2, True)
    with Journal(path) as j:
        assert j.claim("T01").lost is None
        assert [p.seq for p in j.events_since(0)] == [1, 2]


def test_a_coups_analytics_go_into_the_next_inputs_transaction_when_it_comes_during_the_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A coup's end is synced by the syncer while the loop goes on; an input
    # read meanwhile (a replay reads the next at once) stores the held
    # analytics in its own transaction, ahead of its events, rather than
    # waiting for a transaction of theirs. The stream is the replay's all
    # the same (``test_the_daemon_with_odds_on_stores_what_replay_emits``).
    alone: list[list[str]] = []
    along: list[list[str]] = []
    real_events, real_input = Journal.append_events, Journal.append_input

    def append_events(self: Journal, events: Any, **kw: Any) -> Any:
        if any(e["type"] == "roads" for e in events):
            alone.append([e["type"] for e in events])
        return real_events(self, events, **kw)

    def append_input(self: Journal, t: float, kind: str, data: bytes, events: Any = (), **kw: Any) -> Any:
        if any(e["type"] == "roads" for e in events):
            along.append([e["type"] for e in events])
        return real_input(self, t, kind, data, events, **kw)

    monkeypatch.setattr(Journal, "append_events", append_events)
    monkeypatch.setattr(Journal, "append_input", append_input)
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": False}
        )
    )
    assert Daemon(cfg, stop_at_eof=True).run() == 0
    stored = _stored(tmp_path / "journal.sqlite3")
    settled = sum(1 for e in stored if e["type"] == "coup.result")
    assert settled >= 3, settled
    # every coup's roads stored once, most of them with the next input
    assert len(along) + len(alone) == settled
    assert len(along) > settled // 2, (len(along), len(alone))
    # held analytics come first in that transaction, before the input's events
    for types in along:
        assert types[0] == "roads", types


class _ArrivesWhilePublishing:
    """The capture's reads, each coming only once the daemon has published
    what the input before it made durable: the device is silent until
    ``Daemon._publish_durable`` has sent something (or found nothing left
    to send), and the next read is there when it returns (a coup's first
    card that comes while the RESULT goes out)."""

    def __init__(self, path: Path) -> None:
        from controller.shoelog import device_reads

        self._reads = iter(device_reads(path))
        self.arrived = True
        self.eof = False

    def open(self) -> None:
        pass

    def read(self, timeout: float) -> tuple[float, bytes] | None:
        if not self.arrived:
            return None
        self.arrived = False
        item = next(self._reads, None)
        self.eof = item is None
        return item

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


class _ReadArrivesOnPublish(Daemon):
    def _publish_durable(self, *, wait: bool = False) -> None:
        waiting = len(self._awaiting)
        super()._publish_durable(wait=wait)
        assert isinstance(self._driver, _ArrivesWhilePublishing)
        if len(self._awaiting) < waiting or not waiting:
            self._driver.arrived = True  # something went out


def test_an_input_come_while_the_loop_published_takes_the_held_analytics_along(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The device is looked at again before held analytics are stored in a
    # transaction of their own: an input that came while the last sync's
    # events were published is read first, and takes them along (it does
    # not wait behind their commit).
    alone: list[list[str]] = []
    real_events = Journal.append_events

    def append_events(self: Journal, events: Any, **kw: Any) -> Any:
        if any(e["type"] == "roads" for e in events):
            alone.append([e["type"] for e in events])
        return real_events(self, events, **kw)

    monkeypatch.setattr(Journal, "append_events", append_events)
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": False}
        )
    )
    daemon = _ReadArrivesOnPublish(cfg, driver=_ArrivesWhilePublishing(CAPTURE), stop_at_eof=True)
    assert daemon.run() == 0
    stored = _stored(tmp_path / "journal.sqlite3")
    assert sum(1 for e in stored if e["type"] == "coup.result") >= 3
    # none alone but (at most) the last coup's, which no input follows
    assert len(alone) <= 1, alone
    want = [dumps(e) for e in replay_events(CAPTURE, ReplayOptions(odds=True, roads=True))]
    assert [dumps(e) for e in stored] == want


class _WatchesBurnCards(Daemon):
    """Notes, whenever an input that dealt a card has analytics to drain
    (a shoe's burn card: the new shoe's odds), how many of the cards dealt
    so far had been published (counted by ``_delivered``) by then."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.dealt = 0
        self.last_dealt_a_card = False
        self.seen: list[tuple[int, int]] = []  # (cards dealt, cards published)

    def _apply_input(self, *a: Any, **kw: Any) -> Any:
        events = super()._apply_input(*a, **kw)
        self.last_dealt_a_card = any(e["type"] == "card" for e in events)
        self.dealt += sum(1 for e in events if e["type"] == "card")
        return events

    def _drain_analytics(self) -> None:
        assert self.engine is not None
        if self.last_dealt_a_card and self.engine._deferred:
            self.seen.append((self.dealt, self.stats.cards))
        super()._drain_analytics()


def test_a_card_whose_analytics_follow_is_published_before_they_are_computed(tmp_path: Path) -> None:
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": True}
        )
    )
    out = io.StringIO()
    daemon = _WatchesBurnCards(cfg, stdout=out, stop_at_eof=True)
    assert daemon.run() == 0
    assert daemon.seen, "the capture has no card whose analytics follow (a shoe's burn card)"
    # the card was out before its analytics were computed (the new shoe's
    # odds take milliseconds and are not prepared ahead)
    assert all(published == dealt for dealt, published in daemon.seen), daemon.seen
    # and the stream is still the one replay gives
    want = [dumps(e) for e in replay_events(CAPTURE, ReplayOptions(odds=True, roads=True))]
    assert unsigned(out.getvalue()).splitlines() == want
