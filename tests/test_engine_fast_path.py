"""The engine's fast path (``controller.engine.fast``) and the fast event
builders do exactly what the general path does: the same events, byte for
byte, on the whole capture corpus and on a long fake-shoe run with every
fault kind, under every coup-boundary and extra-card rule."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.bench_replay import make_capture
from controller import events
from controller.engine import Engine, fast
from controller.event_types import CardEvent, CoupResult
from controller.replay import ReplayOptions, replay_events
from controller.rules import load_profile
from controller.shoelog import ShoelogWriter
from drivers.fake import PROTOCOLS, FakeShoe
from drivers.fake_settings import FAULT_KINDS

CAPTURES = sorted((Path(__file__).parent / "captures").glob("*.shoelog"))
ENVELOPE = ("v", "type", "event_id", "table", "shoe", "seq", "ts")

OPTIONS = {
    "as-captured": ReplayOptions(),
    "auto": ReplayOptions(rules={"coup_boundary": "auto"}),
    "next-coup": ReplayOptions(rules={"extra_card": "next_coup", "demo_coups": 2}),
    "void-extra": ReplayOptions(rules={"extra_card": "void", "after_cut": "last"}),
}


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Long fake-shoe runs with every fault kind, in each protocol (Angel
    Eye's cards name their hand; shoe-bin's their deck)."""
    d = tmp_path_factory.mktemp("fast")
    faults = ",".join(f"{kind}:0.03" for kind in FAULT_KINDS)
    paths = []
    for i, protocol in enumerate(PROTOCOLS):
        path = d / f"faults{i}.shoelog"
        fake = FakeShoe(seed=5 + i, protocol=protocol, decks=8, faults=faults, shoes=4, cards_per_second=2)
        with open(path, "w", encoding="utf-8") as fh:
            w = ShoelogWriter(fh, {"protocol": protocol, "table": "T01"})
            for t, data in fake.stream():
                w.write(t, "<", data)
        paths.append(path)
    return paths


def _lines(path: Path, opts: ReplayOptions) -> Iterator[str]:
    for ev in replay_events(path, opts):
        yield events.dumps(ev)


def _both_ways(
    path: Path, opts: ReplayOptions, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], list[str]]:
    fast_lines = list(_lines(path, opts))
    with monkeypatch.context() as m:
        m.setattr(fast, "ENABLED", False)
        general = list(_lines(path, opts))
    return fast_lines, general


@pytest.mark.parametrize("rules", list(OPTIONS))
def test_the_fast_path_gives_the_general_paths_events(
    rules: str, fault_runs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = 0
    for path in [*CAPTURES, *fault_runs]:
        fast_lines, general = _both_ways(path, OPTIONS[rules], monkeypatch)
        assert fast_lines == general, path.name
        taken += len(fast_lines)
    assert taken > 5000  # not vacuous


def test_the_fast_path_takes_the_common_case(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A clean shoe: every card after the burn and every RESULT take the
    fast path (its NEWSHOE does not)."""
    path = tmp_path / "clean.shoelog"
    make_capture(path, shoes=1)
    taken = {"card": 0, "result": 0}
    for name in taken:
        original = getattr(fast, name)

        def spy(eng: Engine, f: object, name: str = name, original: object = original) -> object:
            got = original(eng, f)  # type: ignore[operator]
            taken[name] += got is not False
            return got

        monkeypatch.setattr(fast, name, spy)
    evs = list(replay_events(path))
    dealt = [ev for ev in evs if ev["type"] == "card" and ev["position"] != "burn"]
    assert taken["card"] == len(dealt) > 300
    assert taken["result"] == sum(ev["type"] == "coup.result" for ev in evs) > 50


def test_a_card_event_built_at_once_is_the_typed_one() -> None:
    profile = load_profile("punto_banco")
    a, b = Engine("T01", profile, 8), Engine("T01", profile, 8)
    for coup, pos, card, face_up in [
        (1, "P1", "QS", False),
        (None, "burn", None, True),
        (7, "extra", "9D", False),
    ]:
        value = None if card is None else {"Q": 0, "9": 9}[card[0]]
        a._out, b._out = [], []
        a._emit_card(1763800000.125, coup, pos, card, value, face_up)
        b._emit(
            1763800000.125,
            CardEvent(coup=coup, position=pos, card=card, value=value, face_up=face_up),  # type: ignore[arg-type]
        )
        assert a._out == b._out
        assert list(a._out[0]) == list(b._out[0])


@pytest.mark.parametrize(
    "pays", [0.95, 1, 0.5, 1.5, 8, 1e-4, 0.00011, 9.5e-05, 1e-05, 1e15, 1e16, 999999999999999.9, 0.1 + 0.2]
)
def test_a_coup_result_is_written_as_json_writes_it(pays: float) -> None:
    ev = {
        "v": 1,
        "type": "coup.result",
        "event_id": "T01/S/1",
        "table": "T01",
        "shoe": "S",
        "seq": 1,
        "ts": "2026-11-22T06:56:11.125Z",
        "coup": 1,
        "demo": False,
        "player": {"cards": ["4H", "9H"], "total": 3},
        "banker": {"cards": ["5H", "6S", "KC"], "total": 1},
        "winner": "banker",
        "natural": False,
        "player_pair": False,
        "banker_pair": False,
        "tags": [],
        "settlement": {"player": -1, "banker": pays, "tie": -pays if pays <= 1 else 0},
        "corrections": [],
    }
    assert events.dumps(ev) == events._slow_dumps(ev)
    ev["settlement"] = None
    assert events.dumps(ev) == events._slow_dumps(ev)


def test_timestamps_are_strftimes() -> None:
    rng = random.Random(7)
    times = [0.0, -1.0, 0.0004, 0.0005, 59.9995, 86399.9996, 951868799.9995, 253402300799.999, 1e20]
    times += [rng.uniform(0, 253402300800) for _ in range(20000)]
    for t in times:
        ms = min(max(round(t * 1000), 0), events.MAX_MS)
        want = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"
        assert events.format_ts(t) == want, t


def test_a_coup_result_built_at_once_is_the_typed_one(tmp_path: Path) -> None:
    path = tmp_path / "clean.shoelog"
    make_capture(path, shoes=1)
    results = [ev for ev in replay_events(path, OPTIONS["next-coup"]) if ev["type"] == "coup.result"]
    assert any(ev["demo"] for ev in results) and not all(ev["demo"] for ev in results)
    for ev in results:
        payload = {k: v for k, v in ev.items() if k not in ENVELOPE}
        typed = events.payload_dict(CoupResult(**payload))
        assert list(typed.items()) == list(payload.items())
