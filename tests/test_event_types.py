"""Events are built from their typed definitions (``controller.event_types``)
and keep their published shape: envelope first, then the payload's fields
in declared order; and ``events.dumps``'s msgspec path writes exactly the
bytes the ``json`` path writes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller import events
from controller.event_types import EVENT_TYPES, CardEvent, DeviceStatus, OddsUpdate, SecurityAlert
from controller.replay import replay_events

CAPTURES = sorted((Path(__file__).parent / "captures").glob("*.shoelog"))
ENVELOPE = ["v", "type", "event_id", "table", "shoe", "seq", "ts"]


@pytest.mark.parametrize("capture", CAPTURES[:12], ids=[p.stem for p in CAPTURES[:12]])
def test_corpus_events_keep_their_key_order_and_bytes(capture: Path) -> None:
    for ev in replay_events(capture):
        fields = list(EVENT_TYPES[ev["type"]].__struct_fields__)
        assert list(ev) == ENVELOPE + [f for f in fields if f in ev]
        assert events.dumps(ev) == events._slow_dumps(ev)


def test_only_types_without_floats_take_the_msgspec_path() -> None:
    assert "odds.update" not in events.FAST_TYPES  # probabilities: 1e-05 is written 0.00001 by msgspec
    assert "coup.result" not in events.FAST_TYPES  # settlement payouts
    assert {"card", "misdeal", "security.alert", "coup.void"} <= events.FAST_TYPES
    assert msgspec.json.encode(1e-05) != events._slow_dumps(1e-05).encode()  # type: ignore[arg-type]


ODDS_VALUES = [
    0.0,
    -0.0,
    1e-4,
    0.00011,
    9.5e-05,
    1e-05,
    -0.0106,
    1 / 3,
    1e15,
    1e16,
    999999999999999.9,
    0.1 + 0.2,
]


@pytest.mark.parametrize("x", ODDS_VALUES)
def test_odds_are_written_as_json_writes_them(x: float) -> None:
    # odds.update takes msgspec when each float is written alike by both
    bet = {"win": x, "push": 0.0, "lose": 1 - x if abs(x) < 1 else 0.5, "ev": -x}
    ev = _event(OddsUpdate(coup=3, cards_left=400, view="shoe", bets={"banker": bet, "player": bet}))
    assert events.dumps(ev) == events._slow_dumps(ev)


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=4, max_size=4))
def test_odds_with_any_floats_are_written_as_json_writes_them(xs: list[float]) -> None:
    bet = dict(zip(("win", "push", "lose", "ev"), xs, strict=True))
    ev = _event(OddsUpdate(coup=3, cards_left=400, view="counter", bets={"tie": bet}))  # type: ignore[arg-type]
    assert events.dumps(ev) == events._slow_dumps(ev)


@pytest.mark.parametrize("x", [float("nan"), float("inf"), -float("inf")])
def test_odds_that_are_not_numbers_are_refused_as_before(x: float) -> None:
    bet = {"win": 0.5, "push": 0.0, "lose": 0.5, "ev": x}
    ev = _event(OddsUpdate(coup=3, cards_left=400, view="shoe", bets={"tie": bet}))
    with pytest.raises(ValueError, match="not JSON compliant"):
        events.dumps(ev)


def test_odds_with_floats_msgspec_writes_otherwise_take_json(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[bytes] = []
    real = events._msgspec_encode

    def spy(obj: object) -> bytes:
        used.append(real(obj))
        return used[-1]

    monkeypatch.setattr(events, "_msgspec_encode", spy)
    plain = {"win": 0.45, "push": 0.0, "lose": 0.55, "ev": -0.0106}
    events.dumps(_event(OddsUpdate(coup=3, cards_left=400, view="shoe", bets={"banker": plain})))
    assert len(used) == 1  # the fast path, for the common case
    tiny = {**plain, "ev": 1e-05}
    ev = _event(OddsUpdate(coup=3, cards_left=400, view="shoe", bets={"banker": plain, "tie": tiny}))
    assert '"ev":1e-05' in events.dumps(ev)
    assert len(used) == 1  # not msgspec, which writes 0.00001


def _event(payload: msgspec.Struct) -> dict[str, object]:
    ev: dict[str, object] = {
        "v": 1,
        "type": payload.TYPE,  # type: ignore[attr-defined]
        "event_id": "T01/S/1",
        "table": "T01",
        "shoe": None,
        "seq": 1,
        "ts": "2026-11-22T06:56:11.125Z",
    }
    ev.update(events.payload_dict(payload))  # type: ignore[arg-type]
    return ev


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain",
        "é ü 漢字 😀",
        "\x00\x01\x1f\x7f",
        'quote " back \\ slash',
        "\u2028\u2029",
        "\ud7ff\ue000\uffff",
    ],
)
def test_free_text_is_written_as_json_writes_it(text: str) -> None:
    ev = _event(SecurityAlert(code="X", detail=text, coup=None))
    assert events.dumps(ev) == events._slow_dumps(ev)


def test_an_unset_optional_field_is_left_out_and_a_set_one_comes_in_its_place() -> None:
    ev = _event(CardEvent(coup=1, position="P1", card="QS", value=0, face_up=False))
    assert "entered" not in ev
    ev = _event(CardEvent(coup=1, position="P1", card="QS", value=0, face_up=False, entered=True))
    assert list(ev)[-2:] == ["face_up", "entered"]
    dev = {"model": "m", "firmware": "f", "serial": "s"}
    assert list(_event(DeviceStatus(state="fault", code="JAM", device=dev, detail="d")))[-2:] == [
        "device",
        "detail",
    ]


def test_a_value_msgspec_cannot_write_falls_back_to_json() -> None:
    ev = _event(SecurityAlert(code="X", detail="d", coup=2**70))
    assert events.dumps(ev) == events._slow_dumps(ev)


def test_the_engine_loads_the_typed_commands_without_the_config() -> None:
    """The engine imports the command types; the command parser takes the
    table rule from the config only when a command names a table."""
    import subprocess
    import sys

    code = "import sys, controller.engine; print('controller.config' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
