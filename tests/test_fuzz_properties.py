"""No crash, no hang, no card invented: the properties the
fuzz harnesses under ``fuzz/`` check, as hypothesis tests quick enough for
``make test``. The three decoders have their own property tests
(``test_shoe_ascii.py``, ``test_shoe_bin.py``, ``test_angel_eye.py``); these
cover what reads their output and everything else a stranger can send:

- the ``.shoelog`` reader, and a capture replayed through a decoder and an
  engine;
- supervisor commands through the parser, then into a live engine mid-shoe;
- the config and profile loaders, on YAML-ish text and random structures;
- the engine fed random sessions: cards (unread, foreign, duplicated, face
  up, placed on hands, drawn out of the game), buttons, the cut card,
  status codes, restarts, sequence gaps, link changes, device results,
  shuffler commitments, supervisor commands and the passing of time.

What "keeps the contract" means for the engine's output is written once, in
``fuzz.invariants.EngineChecker``; the engine test below also states the
main promises itself.

The tests at the end replay, input by input, the bugs the fuzzers found, so
that none comes back unnoticed: those fixed as plain tests, any open one as
a strict xfail that the properties step over (``KNOWN_BUGS``) until it is
fixed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, reject, settings
from hypothesis import strategies as st

from controller.cards import ALL_CARDS, CARD_VALUE
from controller.commands_schema import CommandError, command_dict, parse_command
from controller.config import load_config
from controller.engine import AWAITING, Engine
from controller.errors import ConfigError, UsageError
from controller.rules import load_profile
from controller.shoelog import Record, ShoelogError, parse_lines
from firmware_protocols import angel_eye, shoe_ascii, shoe_bin
from firmware_protocols.frames import (
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    HostRequest,
    Link,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from fuzz.fuzz_commands import SCENARIOS, TAIL
from fuzz.invariants import EngineChecker, InvariantError, make_engine, validator
from tests.table import Table

T0 = 1_763_800_000.0
#: The last second RFC 3339 can write (9999-12-31T23:59:59Z).
MAX_TS = 253_402_300_799.0

# ---------------------------------------------------------------------------
# Open bugs, each pinned by a strict xfail test at the end of this file: the
# properties step over them (and only them) so that they keep guarding the
# rest. When one is fixed its xfail test passes, which fails the run: turn it
# into a plain test and delete its entry here.

#: invariant code -> the xfail test that pins it (none open at the moment)
KNOWN_BUGS: dict[str, str] = {}


def stepping_over_known_bugs(exc: InvariantError) -> None:
    """Rejects the example if ``exc`` is an open bug; re-raises it if not."""
    if exc.code not in KNOWN_BUGS:
        raise exc
    reject()


# ---------------------------------------------------------------------------
# The .shoelog reader

ascii_frames = st.one_of(
    st.builds(Card, st.just(T0), st.integers(0, 65535), st.sampled_from([*ALL_CARDS, None])),
    st.builds(Button, st.just(T0), st.integers(0, 65535), st.sampled_from(["NEWSHOE", "RESULT"])),
    st.builds(CutCard, st.just(T0), st.integers(0, 65535)),
    st.builds(Status, st.just(T0), st.integers(0, 65535), st.sampled_from(sorted(shoe_ascii.STATUS_CODES))),
    st.builds(Hello, st.just(T0), st.just(0), st.just("FAKE-1"), st.just("1.0"), st.just("000001")),
)
times = st.one_of(
    st.floats(0, MAX_TS).map(lambda t: f"{t:.3f}"),
    st.floats(MAX_TS, 1e30).map(repr),  # past the year 9999: a usage error
    st.sampled_from(["-1", "nan", "inf", "-inf", "1e400", "0x10", "1_0", "", "+5", "١٢"]),
    st.text(max_size=6),
)
payloads = st.one_of(
    ascii_frames.map(lambda f: shoe_ascii.Encoder().encode(f)[:-2].decode()),
    st.binary(max_size=40).map(lambda b: "hex:" + b.hex()),
    st.text(alphabet="0123456789abcdefABCDEF xg", max_size=12).map(lambda s: "hex:" + s),
    st.text(max_size=30),
)
record_lines = st.builds(
    lambda t, d, p: f"{t} {d} {p}", times, st.sampled_from(["<", "<", "<", ">", "<>", "", "x"]), payloads
)
meta_lines = st.builds(
    lambda pairs: "# " + " ".join(f"{k}={v}" for k, v in pairs),
    st.lists(
        st.tuples(
            st.sampled_from(["protocol", "table", "profile", "decks", "burn", "x"]),
            st.sampled_from(
                ["shoe-ascii/1", "shoe-bin/1", "angel-eye/2", "T01", "punto_banco", "1", "8", ""]
            ),
        ),
        max_size=3,
    ),
)
shoelog_texts = st.lists(
    st.one_of(record_lines, record_lines, meta_lines, st.just(""), st.text(max_size=40)), max_size=25
).map(lambda lines: "\n".join(lines))


def read_capture(text: str) -> tuple[dict[str, str], list[Record]] | None:
    meta: dict[str, str] = {}
    records: list[Record] = []
    try:
        for item in parse_lines(text.splitlines(keepends=True), "fuzz.shoelog"):
            if isinstance(item, Record):
                assert math.isfinite(item.t) and item.t >= 0
                assert item.direction in ("<", ">")
                assert isinstance(item.data, bytes)
                records.append(item)
            else:
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in item.items())
                meta.update(item)
    except (ShoelogError, UsageError):
        return None
    return meta, records


@settings(max_examples=300, deadline=None)
@given(st.one_of(shoelog_texts, st.text()))
def test_the_capture_reader_yields_sound_records_or_a_usage_error(text: str) -> None:
    read_capture(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.sampled_from(["shoe-ascii/1", "shoe-bin/1", "angel-eye/2"]), shoelog_texts)
@example("shoe-ascii/1", "253401200800.000 < $SH,0,CARD,AS*01")  # at the end of the time range
def test_a_capture_replays_through_decoder_and_engine_keeping_the_contract(protocol: str, text: str) -> None:
    got = read_capture(text)
    if got is None:
        return
    decoder = {"shoe-ascii/1": shoe_ascii, "shoe-bin/1": shoe_bin, "angel-eye/2": angel_eye}[
        protocol
    ].Decoder()
    checker = EngineChecker(make_engine("punto_banco", 8))
    t = T0
    try:
        for rec in got[1]:
            if rec.direction == "<":
                t = rec.t
                for frame in decoder.feed(rec.t, rec.data):
                    checker.feed(frame)
        checker.finish(t + 100_000.0)
    except InvariantError as exc:
        stepping_over_known_bugs(exc)


# ---------------------------------------------------------------------------
# Supervisor commands: the parser, then a live engine

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["AS", "td", "10d", "XX", " 9h ", "void", "accept"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
)
command_keys = st.sampled_from(["id", "cmd", "coup", "card", "reason", "extra"])
command_dicts = st.dictionaries(
    command_keys,
    st.one_of(
        json_values,
        st.sampled_from(["void", "enter_card", "accept", "new_shoe", "end_shoe"]),
        st.integers(0, 6),
        st.sampled_from(ALL_CARDS),
    ),
    max_size=5,
)
valid_commands = st.one_of(
    st.builds(
        lambda c, k: {"id": 1, "cmd": "enter_card", "coup": c, "card": k},
        st.integers(1, 4),
        st.sampled_from(ALL_CARDS),
    ),
    st.builds(lambda c: {"id": "a", "cmd": "accept", "coup": c}, st.integers(1, 4)),
    st.builds(
        lambda c, r: {"id": 2, "cmd": "void", "coup": c, "reason": r},
        st.integers(1, 4),
        # one line of text, as the command's door takes (controller.textsafe);
        # hostile text is command_dicts' and tests/test_hostile_text.py's
        st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=10),
    ),
    st.just({"id": 3, "cmd": "new_shoe"}),
    st.just({"id": 4, "cmd": "end_shoe"}),
)
command_payloads = st.one_of(
    st.binary(max_size=60),
    json_values.map(lambda v: json.dumps(v).encode()),
    command_dicts.map(lambda d: json.dumps(d).encode()),
    valid_commands.map(lambda d: json.dumps(d).encode()),
    valid_commands.map(lambda d: json.dumps(d).encode()),
)
_command_schema = jsonschema.Draft202012Validator(
    json.loads((Path(__file__).parent.parent / "controller" / "schemas" / "command.json").read_text())
)


@settings(max_examples=400, deadline=None)
@given(command_payloads)
def test_a_command_payload_parses_to_a_schema_valid_command_or_a_command_error(payload: bytes) -> None:
    try:
        cmd = parse_command(payload)
    except CommandError:
        return
    assert _command_schema.is_valid(command_dict(cmd))
    sent = json.loads(payload)
    assert (cmd.id, cmd.NAME) == (sent["id"], sent["cmd"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.integers(0, len(SCENARIOS) - 1),
    st.lists(st.tuples(st.sampled_from([1.0, 1.0, 61.0, 130.0]), command_payloads), max_size=5),
)
def test_commands_applied_mid_shoe_never_break_the_engine(
    scenario: int, sent: list[tuple[float, bytes]]
) -> None:
    script = SCENARIOS[scenario]
    checker = EngineChecker(make_engine("punto_banco", 8))
    t, seq = script.t, script.seq
    for frame in script.frames:
        checker.feed(frame)
    for dt, payload in sent:
        t += dt
        try:
            cmd = parse_command(payload)
        except CommandError:
            continue
        reply, _ = checker.command(cmd, t)
        assert reply["id"] == cmd.id
    for code in TAIL:
        t += 1.0
        seq += 1
        checker.feed(Card(t, seq, code))
    checker.feed(Button(t + 1.0, seq + 1, "RESULT"))
    checker.finish(t + 100_000.0)


# ---------------------------------------------------------------------------
# The config and profile loaders

yaml_tokens = st.sampled_from(
    [
        "table: T01\n", "table: ", "device: {driver: fake}\n", "device:\n  driver: ", "serial", "usb",
        "replay", "fake", "\n  port: /dev/ttyS0", "profile: ", "punto_banco", "decks: ", "8", "13", "0x10",
        "-1", ".nan", "rules:\n  ", "burn: fixed:3", "after_cut: last", "outputs: {mqtt: {host: h}}",
        "odds: ", "true", "~", "null", "name: p\n", "tableau:\n", "bets:\n", "  player:\n    - {pays: -1}\n",
        "{", "}", "[", "]", ":", ", ", "- ", "\n", "  ", "'", '"', "&a ", "*a", "!!str ", "!!int ", "#",
        "%YAML 1.1\n", "---\n", "...\n", "\t", "é", "\x00",
    ]
)  # fmt: skip
yaml_texts = st.one_of(st.lists(yaml_tokens, max_size=30).map("".join), st.text(max_size=80))
config_keys = st.sampled_from(
    [
        "table", "profile", "decks", "device", "driver", "protocol", "port", "baudrate", "vendor_id",
        "product_id", "seed", "faults", "file", "journal", "odds", "outputs", "mqtt", "host", "tls", "rules",
        "burn", "cut_card_min", "demo_coups", "metrics", "name", "tableau", "bets", "natural", "pays", "when",
    ]
)  # fmt: skip
yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(
        ["fake", "serial", "usb", "replay", "T01", "punto_banco", "shoe-bin/1", "fixed:9", "a:b"]
    ),
)
yaml_structures = st.recursive(
    yaml_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.one_of(config_keys, st.text(max_size=6), st.integers(0, 9)), inner, max_size=5)
    ),
    max_leaves=25,
)
config_structures = st.fixed_dictionaries(
    {},
    optional={
        "table": st.one_of(st.just("T01"), yaml_scalars),
        "device": st.one_of(
            st.fixed_dictionaries({"driver": st.sampled_from(["fake", "serial", "usb", "replay", "x"])}),
            yaml_structures,
        ),
        "decks": yaml_scalars,
        "profile": yaml_scalars,
        "rules": yaml_structures,
        "outputs": yaml_structures,
        "name": yaml_scalars,
        "tableau": yaml_structures,
        "bets": yaml_structures,
    },
)


def _load_both(data: bytes) -> None:
    fd, name = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            load_config(name)
        except ConfigError as exc:
            assert str(exc).startswith(name), "a config error names the file"
        with suppress(ConfigError):
            load_profile(name)
    finally:
        os.unlink(name)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.one_of(yaml_texts.map(str.encode), st.binary(max_size=60)))
def test_yamlish_text_loads_as_a_config_or_profile_or_is_a_config_error(data: bytes) -> None:
    _load_both(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.one_of(config_structures, yaml_structures))
def test_random_structures_load_as_a_config_or_profile_or_are_a_config_error(data: Any) -> None:
    _load_both(yaml.safe_dump(data, allow_unicode=True).encode())


# ---------------------------------------------------------------------------
# The engine, fed random sessions

HANDS = ["P1", "B1", "P2", "B2", "P3", "B3", "burn", "first", "burn_count"]
Step = tuple[Any, ...]

card_steps = st.tuples(
    st.just("card"),
    st.one_of(st.sampled_from(ALL_CARDS), st.sampled_from(["AS", "KD", "9H", "5C"]), st.none()),
    st.sampled_from([False, False, False, True]),  # face up
    st.one_of(st.none(), st.none(), st.none(), st.integers(1, 14)),  # coded deck (over the shoe's: foreign)
    st.one_of(st.none(), st.none(), st.sampled_from(HANDS)),  # placed by the device
    st.sampled_from([True] * 9 + [False]),  # a game card
)
other_steps = st.one_of(
    st.tuples(
        st.just("button"), st.sampled_from(["NEWSHOE", "RESULT", "RESULT", "RESULT", "STANDBY", "REDEAL"])
    ),
    st.tuples(st.just("cut")),
    st.tuples(
        st.just("status"),
        st.sampled_from(
            ["OK", "JAM", "EMPTY", "LID_OPEN", "READER_FAULT", "LOW_POWER", "ERROR", "LOCKED", "PRESET"]
        ),
    ),
    st.tuples(st.just("hello")),
    st.tuples(st.just("gap"), st.integers(1, 5)),
    st.tuples(st.just("link"), st.booleans()),
    st.tuples(st.just("host")),
    st.tuples(
        st.just("device_result"),
        st.sampled_from(["player", "banker", "tie", "quit"]),
        st.booleans(),
        st.booleans(),
    ),
    st.tuples(st.just("shuffle"), st.integers(1, 20), st.booleans()),
    st.tuples(st.just("command"), valid_commands),
    st.tuples(st.just("tick"), st.sampled_from([1.0, 30.0, 121.0, 500.0])),
)
#: A coup dealt cleanly (four to six plain cards, then RESULT): most sessions
#: then reach settlement, and the disruptions land between and inside coups.
clean_coups = st.lists(
    st.tuples(
        st.just("card"), st.sampled_from(ALL_CARDS), st.just(False), st.none(), st.none(), st.just(True)
    ),
    min_size=4,
    max_size=6,
).map(lambda cards: [*cards, ("button", "RESULT")])
disruptions = st.lists(st.one_of(card_steps, other_steps), min_size=1, max_size=3)
sessions = st.lists(st.one_of(clean_coups, clean_coups, disruptions), max_size=12).map(
    lambda blocks: [step for block in blocks for step in block]
)
setups = st.fixed_dictionaries(
    {
        "profile": st.sampled_from(["punto_banco", "ez_baccarat", "baccarat_27"]),
        "decks": st.sampled_from([1, 2, 8]),
        "coup_boundary": st.sampled_from(["button", "auto"]),
        "after_cut": st.sampled_from(["one_more", "last"]),
        "extra_card": st.sampled_from(["burn", "next_coup", "void"]),
        "demo_coups": st.integers(0, 2),
        "burn": st.sampled_from(["first_card", "fixed:1", "fixed:1", "decks"]),
        "cut_card_min": st.sampled_from([1, 12]),
        "odds": st.sampled_from([False, False, False, True]),
    }
)


def _shuffle_frames(t: float, seq: int, ncards: int, true: bool) -> list[Frame]:
    order = [ALL_CARDS[(i * 7) % 52] for i in range(ncards)]
    sha = hashlib.sha256(",".join(order).encode()).hexdigest() if true else "0" * 64
    frames: list[Frame] = [ShuffleCommit(t, seq, "S1", ncards, sha)]
    frames += [ShuffleOrder(t, seq, i, tuple(order[i : i + 16])) for i in range(0, ncards, 16)]
    return frames


def play(setup: dict[str, Any], steps: list[Step]) -> tuple[EngineChecker, list[dict[str, Any]]]:
    """Feeds a session through the checker; returns it and every event."""
    rules = {k: v for k, v in setup.items() if k not in ("profile", "decks", "odds")}
    checker = EngineChecker(
        make_engine(setup["profile"], setup["decks"], tuple(sorted(rules.items())), odds=setup["odds"])
    )
    events: list[dict[str, Any]] = []

    def feed(frame: Frame) -> None:
        events.extend(checker.feed(frame))

    t, seq = T0, 0
    for step in steps:
        kind = step[0]
        t += 0.5
        seq += 1
        if kind == "card":
            _, card, face_up, deck, hand, game = step
            feed(Card(t, seq, card, face_up, deck, hand, game))
        elif kind == "button":
            feed(Button(t, seq, step[1]))
        elif kind == "cut":
            feed(CutCard(t, seq))
        elif kind == "status":
            feed(Status(t, seq, step[1]))
        elif kind == "hello":
            seq = 0
            feed(Hello(t, 0, "FUZZ", "1.0", "0001"))
        elif kind == "gap":
            seq += step[1]
            feed(SequenceGap(t, seq, seq - step[1], step[1]))
        elif kind == "link":
            feed(Link(t, None, step[1]))
        elif kind == "host":
            feed(HostRequest(t, None, "STAT"))
            feed(Ack(t, None, True))
        elif kind == "device_result":
            feed(DeviceResult(t, seq, step[1], step[2], step[3]))
        elif kind == "shuffle":
            for f in _shuffle_frames(t, seq, step[1], step[2]):
                feed(f)
        elif kind == "command":
            events.extend(checker.command(parse_command(json.dumps(step[1]).encode()), t)[1])
        else:
            t += step[1]
            events.extend(checker.tick(t))
    n = len(events)
    checker.finish(t + 100_000.0)
    return checker, events[:n]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(setups, sessions)
def test_any_session_keeps_the_event_contract_and_invents_no_card(
    setup: dict[str, Any], steps: list[Step]
) -> None:
    try:
        checker, events = play(setup, steps)
    except InvariantError as exc:
        stepping_over_known_bugs(exc)
    for kind in ("coup.result", "coup.void", "misdeal"):
        event(f"{kind} emitted: {any(ev['type'] == kind for ev in events)}")
    # the checker has checked every event as it came; the main promises, restated:
    for ev in events:
        assert validator(ev["type"]).is_valid(ev)
    seqs = [ev["seq"] for ev in events]
    assert seqs == sorted(set(seqs)), "seq strictly increases"
    ended: dict[tuple[str, int], str] = {}
    bets = set(checker.engine.profile.bet_names)
    for ev in events:
        if ev["type"] in ("coup.result", "coup.void"):
            key = (ev["shoe"], ev["coup"])
            assert key not in ended, f"coup {key}: {ended.get(key)} then {ev['type']}"
            ended[key] = ev["type"]
        if ev["type"] == "coup.result":
            settlement = ev["settlement"]
            assert settlement is None if ev["demo"] else set(settlement) == bets
            for card in ev["player"]["cards"] + ev["banker"]["cards"]:
                assert card in CARD_VALUE


# ---------------------------------------------------------------------------
# Regression tests for the bugs the fuzzers found (strict: they fail until fixed)


def _types(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["type"], e.get("coup"), e.get("code"), e.get("action")) for e in events]


def test_a_gap_on_a_void_coup_opens_no_misdeal_and_loses_no_card() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: a SequenceGap while a void coup is still being dealt
    opens an awaiting SEQUENCE_GAP misdeal on that void coup and holds the frames after it; the
    deadline never fires on a resolved coup, so the misdeal stays open forever and the held cards
    are never reported (controller/engine.py _on_gap/_gap do not check coup.resolved)"""
    t = Table()
    t.new_shoe()
    t.cards("AS", "2S")  # first card A: one card burned
    t.t += 1
    t.seq += 1
    t.feed(Card(t.t, t.seq, "9S", deck=9))  # a coded card from a 9th deck: FOREIGN_CARD, coup 1 void
    t.gap(1)  # frames lost while the void coup is still being dealt
    t.card("5S")
    t.result()
    t.tick(1000.0)
    void_at = next(i for i, e in enumerate(t.events) if e["type"] == "coup.void")
    assert [e for e in t.events[void_at:] if e["type"] == "misdeal" and e["action"] == AWAITING] == []
    assert "5S" in [e["card"] for e in t.events if e["type"] == "card"]
    assert t.engine.snapshot()["open_misdeals"] == []


def test_a_shoe_ends_once_when_a_new_shoe_voids_its_held_last_coup() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: shoe.ended is emitted twice for one shoe when a new
    shoe voids the shoe's last coup while its frames are held: _end_shoe -> _void ->
    _maybe_finish_shoe -> _end_shoe('last coup dealt') emits it, then the outer _end_shoe('new shoe
    loaded') emits it again (controller/engine.py)"""
    t = Table(after_cut="last")
    t.new_shoe()
    t.cards("AS", "2S")
    t.cut()  # coup 1 is the last coup
    t.card("3H")
    t.gap(1)  # coup 1 holds its frames
    t.result()
    t.new_shoe()
    first = t.events[0]["shoe"]
    assert [e["reason"] for e in t.events if e["type"] == "shoe.ended" and e["shoe"] == first] == [
        "new shoe loaded"
    ]


def test_a_shuffle_order_after_a_commitment_mismatch_does_not_crash() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: after SHUFFLE_COMMIT_MISMATCH the commitment's order
    is emptied but the commitment kept, so the next ShuffleOrder frame inside its range raises
    IndexError (controller/engine.py _on_order: c.order[f.index + i] = card)"""
    engine = Engine("T01", load_profile("punto_banco"), 8)
    engine.feed(ShuffleCommit(T0, 1, "S1", 2, "0" * 64))
    alerts = engine.feed(ShuffleOrder(T0, 2, 0, ("AS", "KD")))
    assert [e["code"] for e in alerts] == ["SHUFFLE_COMMIT_MISMATCH"]
    engine.feed(ShuffleOrder(T0, 3, 0, ("AS",)))  # the shuffler sends its order again


def test_no_coup_is_dealt_into_a_shoe_the_supervisor_ended() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: once a shoe that saw its cut card has ended by the
    supervisor's end_shoe, the next cards are dealt and settled as coups of the ended shoe
    (coup.result after shoe.ended) instead of starting a new shoe; likewise a cut card after
    end_shoe is taken into the ended shoe (controller/engine.py _on_card's start-a-shoe test,
    _on_cut)"""
    t = Table()
    t.new_shoe()
    t.cards("AS", "2S")
    t.cut()
    _, events = t.engine.command({"id": 1, "cmd": "end_shoe"}, t.t)
    t.events += events
    ended = t.events[0]["shoe"]
    t.cards("7H", "8D", "9C", "KS")
    t.result()
    assert [e for e in t.events if e["type"] == "coup.result" and e["shoe"] == ended] == []


def test_a_shoe_that_ends_voiding_a_held_coup_leaves_no_coup_open() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: when a new shoe (or end_shoe) voids a coup whose
    frames are held, the frames held after its RESULT are replayed (Engine._void, _after_void) while
    _end_shoe is still running: they open the next coup in the shoe being ended, then _end_shoe
    clears s.coups and emits shoe.ended, so that coup never gets a coup.result or a coup.void and
    its cards count in the old shoe"""
    t = Table()
    t.new_shoe()
    t.cards("AS", "2S")
    t.card("3H")
    t.gap(1)  # coup 1 holds its frames
    t.result()  # held
    t.card("4H")  # held: after the RESULT, so it belongs to coup 2
    t.new_shoe()  # a new shoe before a supervisor acts
    first = t.events[0]["shoe"]
    dealt = {e["coup"] for e in t.events if e["type"] == "card" and e["shoe"] == first and e["coup"]}
    ended = {e["coup"] for e in t.events if e["type"] in ("coup.result", "coup.void") and e["shoe"] == first}
    assert dealt <= ended


def test_cards_held_by_the_last_coup_are_reported_when_it_is_voided() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: when the shoe's last coup is voided with more than
    six cards held (its frames held since an unread card, then its RESULT), _discard_held takes them
    for a 'phantom' next coup; _void_phantom opens it, finds it void as a cut-card overrun and
    returns before reporting its cards (`if coup.resolved: return`): the cards left the shoe but no
    card event ever shows them (controller/engine.py _void_phantom, since 1839211)"""
    t = Table(after_cut="last")
    t.new_shoe()
    t.cards("AS", "2S")
    t.cut()  # coup 1 is the last coup
    t.cards(None, None, None, "3H")  # three unread cards: where the next card goes is unknown
    t.cards("4H", "5H", "6H")  # held
    t.result()  # held
    t.tick(1000.0)  # UNREAD_CARD not corrected: coup 1 void
    shown = [e["card"] for e in t.events if e["type"] == "card"]
    assert {"4H", "5H", "6H"} <= set(shown)


def test_a_command_that_fails_after_a_deadline_loses_no_event() -> None:
    """Found by fuzzing, fixed in 4ddced4: engine: a command that fails (CommandError) after a
    correction deadline has passed returns no events, but the deadline's misdeal(void) and coup.void
    were emitted (seq used) and the coup is void: Engine.command clears out[] including what
    _expire(t) emitted"""
    t = Table()
    t.new_shoe()
    t.cards("AS", "2S")
    t.cards(None, "3H")  # P1 unread: UNREAD_CARD, awaiting a supervisor for 120 s
    reply, events = t.engine.command({"id": 1, "cmd": "accept", "coup": 1}, t.t + 500.0)
    assert reply["ok"] is False
    assert _types(events) == [("misdeal", 1, "UNREAD_CARD", "void"), ("coup.void", 1, "UNREAD_CARD", None)]


@pytest.mark.parametrize("t", ["1e12", "1e20"])
def test_a_capture_time_past_the_year_9999_is_refused_or_replays_within_the_contract(t: str) -> None:
    """Found by fuzzing, fixed in 4ddced4: shoelog/events: a capture time past the year 9999 is
    accepted (parse_lines only refuses t < 0, NaN, inf); replay then raises OverflowError/OSError in
    events.format_ts (a traceback, exit 1) or writes a 5-digit year that breaks the ts schema"""
    text = f"# protocol=shoe-ascii/1 table=T01\n{t} < $SH,0,HELLO,FAKE-1,1.0,000001*7E\n"
    try:
        records = [r for r in parse_lines(text.splitlines(), "x.shoelog") if isinstance(r, Record)]
    except UsageError:
        return
    events = list(
        Engine("T01", load_profile("punto_banco"), 8).feed(
            next(iter(shoe_ascii.Decoder().feed(records[0].t, records[0].data)))
        )
    )
    for ev in events:
        jsonschema.validate(ev, validator(ev["type"]).schema)


def _write(data: bytes) -> str:
    fd, name = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return name


@pytest.mark.parametrize("text", [b"? [a]\n: b\n", b"table: T01\ndevice: {driver: fake, {x: 1}: 2}\n"])
def test_a_config_with_a_list_or_mapping_as_a_key_is_a_config_error(text: bytes) -> None:
    """Found by fuzzing, fixed in 4ddced4: config: a YAML mapping key that is a list or a mapping ('?
    [a]\n: b', '{[a]: b}') raises TypeError: unhashable type in the duplicate-key check
    (controller/config.py _construct_mapping: 'key in seen') instead of a ConfigError; check-config
    prints a traceback"""
    name = _write(text)
    try:
        with pytest.raises(ConfigError):
            load_config(name)
    finally:
        os.unlink(name)


@pytest.mark.parametrize("loader", [load_config, load_profile], ids=["load_config", "load_profile"])
def test_deeply_nested_yaml_is_a_config_error(loader: Callable[[str], Any]) -> None:
    """Found by fuzzing, fixed in 4ddced4: config/rules: deeply nested YAML ('[' * 2000) raises
    RecursionError out of PyYAML, which load_config and load_profile do not turn into a ConfigError
    (check-config prints a traceback)"""
    name = _write(b"[" * 2000)
    try:
        with pytest.raises(ConfigError):
            loader(name)
    finally:
        os.unlink(name)


@pytest.mark.parametrize("loader", [load_config, load_profile], ids=["load_config", "load_profile"])
@pytest.mark.parametrize(
    "text",
    [
        b"table: T01\ndevice: {driver: fake}\njournal: 2026-02-30\n",
        b"a: !!int\n",
        b"!!bool \n",
        b"!!timestamp x\n",
    ],
)
def test_a_yaml_value_its_tag_cannot_construct_is_a_config_error(
    loader: Callable[[str], Any], text: bytes
) -> None:
    """Found by fuzzing, fixed in 4ddced4: config/rules: a scalar PyYAML resolves (or is tagged) as an
    int, float, bool or timestamp but cannot construct ('journal: 2026-02-30', 'table: 2026-13-01',
    'a: !!int', '!!bool ', '!!timestamp x') raises ValueError / IndexError / KeyError /
    AttributeError out of yaml.constructor; load_config and load_profile catch only YAMLError, so
    check-config prints a traceback"""
    name = _write(text)
    try:
        with pytest.raises(ConfigError):
            loader(name)
    finally:
        os.unlink(name)


def test_a_profile_file_that_is_not_utf8_is_a_config_error() -> None:
    """Found by fuzzing, fixed in 4ddced4: rules: a profile file that is not UTF-8 raises
    UnicodeDecodeError out of load_profile (path.read_text), not a ConfigError; check-config and
    replay --profile print a traceback"""
    name = _write(b"name: x\n\xff\n")
    try:
        with pytest.raises(ConfigError):
            load_profile(name)
    finally:
        os.unlink(name)


def test_a_shoe_id_is_never_reused_when_the_clock_steps_back() -> None:
    engine = Engine("T01", load_profile("punto_banco"), 8)
    started = []
    for t in (T0, T0 + 1.0, T0 + 0.5):  # the clock steps back half a second before the third shoe
        for frame in (Button(t, None, "NEWSHOE"), Card(t, None, "AS")):
            started += [e["shoe"] for e in engine.feed(frame) if e["type"] == "shoe.started"]
    assert len(started) == 3
    assert len(set(started)) == 3


def test_a_deadline_near_the_end_of_the_time_range_keeps_the_schema() -> None:
    t = Table()
    t.t = 253_402_300_700.0 - 4  # 9999-12-31T23:58:16Z: a capture may carry it
    t.new_shoe()
    t.cards("AS", "2S", None)
    for ev in t.events:
        jsonschema.validate(ev, validator(ev["type"]).schema)


def test_cards_left_never_goes_negative_when_foreign_cards_are_dealt() -> None:
    engine = Engine("T01", load_profile("punto_banco", {"burn": "fixed:1"}), 1, odds=True)
    events = engine.feed(Button(T0, None, "NEWSHOE"))
    events += engine.feed(Card(T0, None, "2C")) + engine.feed(Card(T0, None, "3C"))  # first card, one burned
    for i in range(14):  # 56 aces of spades from a one-deck shoe: all but one are foreign
        for _ in range(4):
            events += engine.feed(Card(T0 + i, None, "AS"))
        events += engine.feed(Button(T0 + i, None, "RESULT"))
    assert min(e["cards_left"] for e in events if e["type"] == "odds.update") >= 0
    assert engine.snapshot()["cards_left"] >= 0
