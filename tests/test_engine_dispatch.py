"""The engine's one dispatcher (``Engine._drain``): frames released after a
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

#: Python frames above the engine's entry the deepest handling needs (13 in
#: the corpus and the fault run: feed -> _drain -> ... -> _emit); the limit
#: leaves room for the replay and this test's own frames.
HEADROOM = 60

#: (``preview``: an entry run first on a copy of the engine, under ``_command``,
#: to say what it would do: ``controller.engine.evidence``)
ENTRIES = ("feed", "tick", "_command", "preview")

#: (who called _dispatch, who called that, whether the engine was running)
Seen = tuple[str, str, bool]


def _depth() -> int:
    f = sys._getframe(1)
    n = 0
    while f is not None:
        n += 1
        f = f.f_back  # type: ignore[assignment]
    return n


@pytest.fixture
def dispatches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Seen]]:
    """Every frame dispatched, with its two callers: a frame arriving is
    dispatched by ``feed``, a frame released after a wait by the one loop
    (``_drain``) right under an entry; a frame applied from inside another
    operation (a void, a correction) would show that operation instead."""
    seen: list[Seen] = []
    original = Engine._dispatch

    def dispatch(self: Engine, frame: Frame) -> Work | None:
        caller = sys._getframe(1)
        seen.append((caller.f_code.co_name, caller.f_back.f_code.co_name, self._running))  # type: ignore[union-attr]
        return original(self, frame)

    monkeypatch.setattr(Engine, "_dispatch", dispatch)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_depth() + HEADROOM)
    try:
        yield seen
    finally:
        sys.setrecursionlimit(limit)


def _from_the_loop(seen: Seen) -> bool:
    caller, above, running = seen
    return running and (caller == "feed" or (caller == "_drain" and above in ENTRIES))


def _fault_run(tmp_path: Path) -> Path:
    path = tmp_path / "faults.shoelog"
    faults = ",".join(f"{kind}:0.02" for kind in FAULT_KINDS)
    make_capture(path, shoes=12, seed=11, faults=faults)
    return path


def test_every_frame_held_or_not_is_dispatched_by_the_one_loop(
    dispatches: list[Seen], tmp_path: Path
) -> None:
    fed = released = 0
    for path in [*CAPTURES, _fault_run(tmp_path)]:
        before = len(dispatches)
        for ev in replay_events(path):
            fed += ev["type"] == "card"
        bad = [s for s in dispatches[before:] if not _from_the_loop(s)]
        assert bad == [], f"{path.name}: frames dispatched from {sorted(set(bad))}"
        released += sum(caller == "_drain" for caller, _, _ in dispatches[before:])
    assert fed > 5000  # the run is long
    assert released > 100  # not vacuous: the holds release frames, and those are dispatched too


def test_frames_released_from_a_hold_go_through_the_dispatcher(dispatches: list[Seen]) -> None:
    """A gap holds the coup's later frames; ``accept`` releases them: each
    is dispatched by the loop under ``command``, as a frame arriving is."""
    tb = Table()
    tb.start()
    tb.card("4S")
    tb.gap(1)
    tb.cards("5H", "6D", "2C")
    assert tb.of_type("card")[-1]["card"] == "4S"  # held: their positions are unknown
    arriving = len(dispatches)
    reply, events = tb.command(cmd="accept", coup=1)
    assert reply["ok"], reply
    assert [e["card"] for e in events if e["type"] == "card"] == ["5H", "6D", "2C"]
    # (first on a copy of the engine, to say what the entry would do:
    # ``evidence.preview``, dispatched the same way; then for real)
    assert dispatches[arriving:] == [("_drain", "preview", True)] * 3 + [("_drain", "_command", True)] * 3
    assert all(_from_the_loop(s) for s in dispatches)


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
