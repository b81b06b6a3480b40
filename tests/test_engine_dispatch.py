"""The engine's one dispatcher (``Engine._run``): frames released after a
wait are applied by the same loop as frames arriving, never from inside the
operation that released them (a void, a correction, a RESULT), so the
dispatcher is never re-entered and the Python stack does not grow with what
was held.

Proven over every capture of the corpus (the loss and hold captures release
frames from holds) and a long seeded run of the fake shoe with every fault
kind, under a recursion limit only a little above what one frame's handling
needs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.bench_replay import make_capture
from controller.engine import Engine
from controller.engine.state import Work
from controller.replay import replay_events
from drivers.fake_settings import FAULT_KINDS
from firmware_protocols.frames import Card, Frame
from tests.table import Table

CAPTURES = sorted((Path(__file__).parent / "captures").glob("*.shoelog"))

#: Python frames above the dispatcher the deepest handling needs (13 in the
#: corpus and the fault run: feed -> _run -> _dispatch -> ... -> _emit);
#: the limit leaves room for the replay and this test's own frames.
HEADROOM = 60


def _depth() -> int:
    f = sys._getframe(1)
    n = 0
    while f is not None:
        n += 1
        f = f.f_back  # type: ignore[assignment]
    return n


def _below_run() -> int | None:
    """How many Python frames separate the caller from the dispatcher's
    loop (``Engine._run``); None if it is not running under it."""
    run = Engine._run.__code__
    f = sys._getframe(2)
    n = 1
    while f is not None:
        if f.f_code is run:
            return n
        n += 1
        f = f.f_back  # type: ignore[assignment]
    return None


@pytest.fixture
def dispatches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int | None, bool]]]:
    """Every frame dispatched, as (how far below the dispatcher's loop it
    runs, whether the dispatcher was running): a frame applied from inside
    another's handling would sit deeper."""
    seen: list[tuple[int | None, bool]] = []
    original = Engine._dispatch

    def dispatch(self: Engine, frame: Frame) -> Work:
        seen.append((_below_run(), self._running))
        yield from original(self, frame)

    monkeypatch.setattr(Engine, "_dispatch", dispatch)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_depth() + HEADROOM)
    try:
        yield seen
    finally:
        sys.setrecursionlimit(limit)


def _fault_run(tmp_path: Path) -> Path:
    path = tmp_path / "faults.shoelog"
    faults = ",".join(f"{kind}:0.02" for kind in FAULT_KINDS)
    make_capture(path, shoes=12, seed=11, faults=faults)
    return path


def test_every_frame_held_or_not_is_dispatched_at_one_depth_by_the_one_loop(
    dispatches: list[tuple[int | None, bool]], tmp_path: Path
) -> None:
    fed = 0
    for path in [*CAPTURES, _fault_run(tmp_path)]:
        before = len(dispatches)
        for ev in replay_events(path):
            fed += ev["type"] == "card"
        depths = {d for d, _ in dispatches[before:]}
        assert depths == {1}, f"{path.name}: frames dispatched at {depths} frames below the loop"
        assert all(running for _, running in dispatches[before:]), path.name
    assert fed > 5000  # the run is long
    # (not vacuous: the corpus's holds release frames; those are dispatched too)
    loss = [p for p in CAPTURES if p.name.startswith(("loss_", "hold_"))]
    assert len(loss) >= 20


def test_frames_released_from_a_hold_go_through_the_dispatcher(
    dispatches: list[tuple[int | None, bool]],
) -> None:
    """A gap holds the coup's later frames; ``accept`` releases them: each
    is dispatched again, at the same depth as a frame arriving."""
    tb = Table()
    tb.start()
    tb.card("4S")
    tb.gap(1)
    tb.cards("5H", "6D", "2C")
    assert tb.of_type("card")[-1]["card"] == "4S"  # held: their positions are unknown
    arriving = len(dispatches)
    reply, events = tb.command(cmd="accept", coup=1)
    assert reply["ok"], reply
    released = dispatches[arriving:]
    assert [e["card"] for e in events if e["type"] == "card"] == ["5H", "6D", "2C"]
    assert len(released) == 3
    assert {d for d, _ in dispatches} == {1}  # straight from the loop, as the frames arriving


def test_the_dispatcher_refuses_to_be_re_entered(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event sink that fed the engine from inside ``_emit`` would
    interleave two frames' handling: refused, not silently nested."""
    tb = Table()
    engine = tb.engine
    original = Engine._emit

    def emit(self: Engine, *args: object) -> None:
        original(self, *args)  # type: ignore[arg-type]
        self.feed(Card(tb.t, None, "9S"))

    monkeypatch.setattr(Engine, "_emit", emit)
    with pytest.raises(RuntimeError, match="re-entered"):
        tb.hello()
    assert engine._running is False  # released, so the engine is usable after the error
