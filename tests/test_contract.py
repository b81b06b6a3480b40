"""Every event the engine emits matches the shipped JSON Schema of its type
(docs/events.md), and the envelope keeps its promises: ids are
``<table>/<shoe>/<seq>``, seq strictly increases, ts is RFC 3339 UTC ms."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from controller.contract import event_schema, event_types
from controller.replay import ReplayOptions, replay_events
from drivers.fake import FakeShoe
from tests.table import Table
from tests.test_replay import _write

CAPTURES = sorted((Path(__file__).parent / "captures").glob("*.shoelog"))


def _check(events: list[dict]) -> None:  # type: ignore[type-arg]
    last_seq = 0
    for ev in events:
        jsonschema.validate(ev, event_schema(ev["type"]))
        assert ev["event_id"] == f"{ev['table']}/{ev['shoe'] or '-'}/{ev['seq']}"
        assert ev["seq"] > last_seq
        last_seq = ev["seq"]


def test_schemas_are_valid_and_cover_every_event_type_of_the_spec() -> None:
    assert set(event_types()) == {
        "device.status",
        "shoe.started",
        "shoe.burn",
        "shoe.cut_card",
        "shoe.ended",
        "card",
        "coup.result",
        "coup.corrected",
        "coup.void",
        "misdeal",
        "security.alert",
        "odds.update",
        "roads",
    }
    for t in event_types():
        jsonschema.Draft202012Validator.check_schema(event_schema(t))


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_corpus_event_matches_its_schema(capture: Path) -> None:
    # with the roads on: their cells' schema is checked against real roads
    _check(list(replay_events(capture, ReplayOptions(roads=True))))


def test_a_faulty_fake_shoe_session_matches_the_schemas(tmp_path: Path) -> None:
    faults = (
        "garbage:0.05,badck:0.01,gap:0.01,unread:0.02,extra:0.02,"
        "premature:0.02,faceup:0.02,jam:0.01,foreign:0.01"
    )
    fake = FakeShoe(seed=3, decks=6, shoes=2, faults=faults, cards_per_second=1)
    path = tmp_path / "faulty.shoelog"
    _write(path, list(fake.stream()))
    events = list(replay_events(path))
    assert {e["type"] for e in events} >= {"misdeal", "coup.void", "coup.result"}
    _check(events)


def test_a_session_with_corrections_matches_the_schemas() -> None:
    # coup.corrected comes only of a supervisor's command: none is in the corpus
    tb = Table()
    tb.engine.roads = True
    tb.start()
    tb.cards("4H", "KD", "3C", "8S")
    tb.result()
    for cards in ({"B2": "7S"}, {"P1": "3S", "P2": "4S"}):
        reply, _ = tb.command(cmd="correct", coup=1, cards=cards, reason="tape", confirm=True)
        assert reply["ok"], reply
    reply, _ = tb.command(
        id=2**63 - 1, cmd="correct", coup=1, cards={"B1": "KH"}, reason="x" * 500, confirm=True
    )
    assert reply["ok"], reply
    assert len(tb.of_type("coup.corrected")) == 3
    _check(tb.events)
    bad = dict(tb.last("coup.corrected"), changes=[])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, event_schema("coup.corrected"))


def test_a_schema_rejects_what_breaks_the_contract() -> None:
    ev = {
        "v": 1,
        "type": "card",
        "event_id": "T01/S/1",
        "table": "T01",
        "shoe": "S",
        "seq": 1,
        "ts": "2026-11-22T06:56:11.125Z",
        "coup": 1,
        "position": "P4",
        "card": "QS",
        "value": 0,
        "face_up": False,
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(ev, event_schema("card"))
