"""``controller.events.dumps`` keeps one C encoder instead of building one
per event: it must write exactly what ``json.JSONEncoder`` with the
project's settings writes, and refuse what it refuses."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from controller import events
from controller.events import dumps
from controller.replay import ReplayOptions, replay_events

CAPTURES = Path(__file__).parent / "captures"
REFERENCE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

ODD_VALUES: list[Any] = [
    {"text": 'é \u2028 \x00 \x1f " \\ / \ud800', "emoji": "🂡"},
    {"floats": [0.95, -0.0, 1e-07, 1e300, 2.5], "ints": [0, -1, 10**20], "flags": [True, False, None]},
    {"nested": {"a": [{"b": []}, {}], "c": ()}, 1: "int key", None: "null key", 2.5: "float key"},
]


@pytest.mark.parametrize("c_encoder", [True, False], ids=["c-encoder", "fallback"])
def test_dumps_writes_what_json_encoder_writes_for_every_corpus_event_and_odd_values(c_encoder, monkeypatch):
    if not c_encoder:
        monkeypatch.setattr(events, "_c_encode", None)
    elif events._c_encode is None:  # pragma: no cover - CPython without _json
        pytest.skip("no C JSON encoder in this interpreter")
    evs: list[Any] = list(ODD_VALUES)
    for path in sorted(CAPTURES.glob("*.shoelog")):
        evs.extend(replay_events(path, ReplayOptions(odds=True, roads=True)))
    assert len(evs) > 500
    for ev in evs:
        assert dumps(ev) == REFERENCE.encode(ev)


@pytest.mark.parametrize(
    ("value", "error"), [(math.nan, ValueError), (math.inf, ValueError), (object(), TypeError)]
)
def test_dumps_refuses_what_json_encoder_refuses(value, error):
    with pytest.raises(error):
        REFERENCE.encode({"x": [value]})
    with pytest.raises(error):
        dumps({"x": [value]})
    assert dumps({"x": 1}) == '{"x":1}'  # and the next event encodes as ever
