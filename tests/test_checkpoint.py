"""Checkpoints (``controller.checkpoint``): an explicit, versioned JSON
schema in place of a pickle of the engine's private attributes.

* a checkpoint taken at any point and restored into a fresh engine and
  decoder continues exactly as an uninterrupted run: at every read of every
  capture of the corpus, and at a random point of random fuzz sessions
  (held frames, a lost numbering, open deadlines and a void coup awaiting its
  RESULT among the states checkpointed);
* a checkpoint of another version, a damaged one, or one of an older
  release (a pickle) is ignored with one log line, and the daemon rebuilds
  the same state and the same events from the journal's inputs;
* the schema lists every attribute of ``Engine``, ``Shoe``, ``Coup`` and the
  decoders: a new one that is not in it fails here;
* the size of a checkpoint at the bound of what a coup may hold.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller import checkpoint
from controller.config import load_config
from controller.daemon import CHECKPOINT_KEY, Daemon
from controller.engine import MAX_HELD, Coup, Engine, Shoe, _Commit
from controller.engine.machine import CoupState, ShoePhase
from controller.journal import Journal
from controller.odds import OddsCalculator
from controller.replay import ReplayOptions, settings_for
from controller.rules import load_profile
from controller.shoelog import Record, read_shoelog
from firmware_protocols import angel_eye, shoe_ascii, shoe_bin
from firmware_protocols.detect import AutoDecoder, make_decoder
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
    Status,
)
from fuzz.invariants import make_engine
from tests.test_fuzz_properties import Step, _shuffle_frames, sessions, setups

CAPTURES = sorted((Path(__file__).parent / "captures").glob("*.shoelog"))
T0 = 1_763_800_000.0

# --------------------------------------------------------------- helpers


def restored(
    engine: Engine, decoder: Any, new_engine: Callable[[], Engine], new_decoder: Callable[[], Any]
) -> tuple[Engine, Any]:
    text = checkpoint.dump(7, engine, decoder)
    json.loads(text)  # plain JSON
    after, e2, d2 = checkpoint.load(text, new_engine, new_decoder)
    assert after == 7
    s = e2.shoe
    if s is not None:
        # the engine compares phases and states by identity (fast.card,
        # shoe.maybe_finish_shoe): restored as the enums' members, not strings
        assert type(s.phase) is ShoePhase
        assert all(
            type(c.state) is CoupState for c in [*s.coups.values(), *([s.current] if s.current else [])]
        )
    return e2, d2


def states(engine: Engine) -> set[str]:
    """Which of the hard states the engine is in."""
    s = engine.shoe
    found = set()
    if s is None:
        return found
    coups = list(s.coups.values()) + ([s.current] if s.current is not None else [])
    if any(c.held for c in coups):
        found.add("held frames")
    if s.numbering_lost is not None:
        found.add("numbering lost")
    if engine.next_deadline() is not None:
        found.add("open deadline")
    if any(c.void_code is not None and c.dealing for c in coups):
        found.add("void coup awaiting RESULT")
    if s.after_premature is not None:
        found.add("cards after an early RESULT")
    return found


def capture_setup(path: Path) -> tuple[Callable[[], Engine], Callable[[], Any], list[Record]]:
    st_ = settings_for(path, ReplayOptions())
    profile = load_profile(st_["profile"], st_["rules"])

    def new_engine() -> Engine:
        return Engine(st_["table"], profile, st_["decks"], odds=True, roads=True)

    def new_decoder() -> Any:
        return AutoDecoder() if st_["protocol"] == "auto" else make_decoder(st_["protocol"])

    records = [r for r in read_shoelog(path) if isinstance(r, Record) and r.direction == "<"]
    return new_engine, new_decoder, records


def feed(engine: Engine, decoder: Any, rec: Record) -> list[dict[str, Any]]:
    return [ev for f in decoder.feed(rec.t, rec.data) for ev in engine.feed(f)]


# ----------------------------------------------------- round trip: captures


@pytest.fixture
def odds_tables_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The odds tables of a profile built once for the test, not once for
    each fresh engine (a checkpoint restored at each of ~1,400 reads builds
    as many engines, and the tables were nearly all of its time): the
    calculator is a pure function of the profile's bets and tableau (its
    memo holds results of the same function)."""
    built: dict[int, tuple[Any, OddsCalculator]] = {}
    make = OddsCalculator.for_profile

    def once(profile: Any) -> OddsCalculator:
        if id(profile) not in built:
            built[id(profile)] = (profile, make(profile))  # the profile kept: its id stays its own
        return built[id(profile)][1]

    monkeypatch.setattr(OddsCalculator, "for_profile", once)


@pytest.mark.slow
@pytest.mark.usefixtures("odds_tables_once")
def test_every_capture_checkpointed_at_every_read_continues_as_if_uninterrupted() -> None:
    seen: set[str] = set()
    cuts = 0
    for path in CAPTURES:
        new_engine, new_decoder, records = capture_setup(path)
        whole_e, whole_d = new_engine(), new_decoder()
        after = [feed(whole_e, whole_d, r) for r in records]
        e, d = new_engine(), new_decoder()
        for k in range(len(records) + 1):
            e2, d2 = restored(e, d, new_engine, new_decoder)
            seen |= states(e2)
            cuts += 1
            rest = [feed(e2, d2, r) for r in records[k:]]
            assert rest == after[k:], f"{path.name}: restored after read {k} differs"
            assert d2.stats == whole_d.stats
            if k < len(records):
                feed(e, d, records[k])
    assert cuts > 500
    # a frame split across reads, an angel-eye seq cycle being learned, and
    # auto-detection holding reads are among the decoder states restored
    assert {"held frames", "open deadline", "void coup awaiting RESULT"} <= seen, seen


# ------------------------------------------------- round trip: fuzz sessions


Input = tuple[str, Any, float]


def inputs_of(steps: list[Step]) -> list[Input]:
    """The session of ``play`` (tests/test_fuzz_properties.py) as inputs."""
    from controller.commands_schema import parse_command

    out: list[Input] = []
    t, seq = T0, 0
    for step in steps:
        kind = step[0]
        t += 0.5
        seq += 1
        frames: list[Frame] = []
        if kind == "card":
            _, card, face_up, deck, hand, game = step
            frames = [Card(t, seq, card, face_up, deck, hand, game)]
        elif kind == "button":
            frames = [Button(t, seq, step[1])]
        elif kind == "cut":
            frames = [CutCard(t, seq)]
        elif kind == "status":
            frames = [Status(t, seq, step[1])]
        elif kind == "hello":
            seq = 0
            frames = [Hello(t, 0, "FUZZ", "1.0", "0001")]
        elif kind == "gap":
            seq += step[1]
            frames = [SequenceGap(t, seq, seq - step[1], step[1])]
        elif kind == "link":
            frames = [Link(t, None, step[1])]
        elif kind == "host":
            frames = [HostRequest(t, None, "STAT"), Ack(t, None, True)]
        elif kind == "device_result":
            frames = [DeviceResult(t, seq, step[1], step[2], step[3])]
        elif kind == "shuffle":
            frames = _shuffle_frames(t, seq, step[1], step[2])
        elif kind == "command":
            out.append(("cmd", parse_command(json.dumps(step[1]).encode()), t))
        else:
            t += step[1]
            out.append(("tick", None, t))
        out.extend(("frame", f, t) for f in frames)
    return out


def apply(engine: Engine, inp: Input) -> Any:
    kind, value, t = inp
    if kind == "frame":
        return engine.feed(value)
    if kind == "cmd":
        return engine.command(value, t)
    return engine.tick(t)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@pytest.mark.slow
@given(setups, sessions, st.data())
def test_a_session_checkpointed_anywhere_continues_as_if_uninterrupted(
    setup: dict[str, Any], steps: list[Step], data: st.DataObject
) -> None:
    rules = tuple(sorted((k, v) for k, v in setup.items() if k not in ("profile", "decks", "odds")))

    def new_engine() -> Engine:
        return make_engine(setup["profile"], setup["decks"], rules, odds=setup["odds"], roads=True)

    inputs = inputs_of(steps)
    cut = data.draw(st.integers(0, len(inputs)), label="cut")
    whole = new_engine()
    want = [apply(whole, i) for i in inputs]
    e = new_engine()
    for i in inputs[:cut]:
        apply(e, i)
    e2, _ = restored(e, None, new_engine, lambda: None)
    for name in sorted(states(e2)):
        event(f"checkpointed with {name}")
    assert [apply(e2, i) for i in inputs[cut:]] == want[cut:]
    assert e2.snapshot() == whole.snapshot()


def _lose_numbering(e: Engine) -> list[Input]:
    """A coup dealt, then five frames lost between coups: the numbering is lost."""
    t = T0
    frames: list[Frame] = [Hello(t, 0, "F", "1", "1"), Button(t, 1, "NEWSHOE"), Card(t, 2, "9S")]
    frames += [Card(t, 3 + i, c) for i, c in enumerate(["AS", "2S", "3S", "4S"])]
    frames += [Button(t, 7, "RESULT"), SequenceGap(t + 1, 13, 8, 5)]
    frames += [Card(t + 2, 14 + i, c) for i, c in enumerate(["5S", "6H", "7S"])]
    return [("frame", f, f.t) for f in frames]


@pytest.mark.slow
def test_hard_states_restore_deterministically() -> None:
    # A numbering loss (with its held frames and open deadline), then an
    # accept and more coups: checkpointed at every input.
    profile = load_profile("punto_banco", {"correction_deadline_s": 30.0})

    def new_engine() -> Engine:
        return Engine("T01", profile, 8, odds=True, roads=True)

    inputs = _lose_numbering(new_engine())
    t = T0 + 3
    inputs.append(("cmd", {"id": "a", "cmd": "accept", "coup": 4}, t))
    for i, c in enumerate(["8S", "9H", "TS", "JS", "QS", "KS", "AH", "2H"]):
        inputs.append(("frame", Card(t + i, 17 + i, c), t + i))
    inputs.append(("frame", Button(t + 9, 25, "RESULT"), t + 9))
    inputs.append(("tick", None, t + 100))
    whole = new_engine()
    want = [apply(whole, i) for i in inputs]
    e = new_engine()
    seen: set[str] = set()
    for k in range(len(inputs) + 1):
        e2, _ = restored(e, None, new_engine, lambda: None)
        seen |= states(e2)
        assert [apply(e2, i) for i in inputs[k:]] == want[k:], f"restored after input {k}"
        if k < len(inputs):
            apply(e, inputs[k])
    assert {"numbering lost", "open deadline"} <= seen, seen


# --------------------------------------------- the schema misses no state


def _rich_engines() -> list[Engine]:
    engines = []
    for path in CAPTURES:
        new_engine, new_decoder, records = capture_setup(path)
        e, d = new_engine(), new_decoder()
        for r in records:
            feed(e, d, r)
        engines.append(e)
    return engines


def test_the_schema_lists_every_attribute_of_the_engine_its_shoe_and_coups() -> None:
    engine_attrs: set[str] = set()
    shoe_attrs: set[str] = set()
    coup_attrs: set[str] = set()
    for e in _rich_engines():
        engine_attrs |= set(vars(e))
        if e.shoe is not None:
            shoe_attrs |= set(vars(e.shoe))
            for c in e.shoe.coups.values():
                # (slots: a coup has no attribute beyond its fields)
                assert not hasattr(c, "__dict__")
                coup_attrs |= {k for k in Coup.__slots__ if hasattr(c, k)}
    saved = set(checkpoint.ENGINE_FIELDS)
    assert engine_attrs == saved | set(checkpoint.ENGINE_CONFIG) | set(checkpoint.ENGINE_SCRATCH), (
        "a new Engine attribute: add it to controller/checkpoint.py (ENGINE_FIELDS, or ENGINE_CONFIG if "
        "the config gives it) and raise VERSION"
    )
    assert not saved & (set(checkpoint.ENGINE_CONFIG) | set(checkpoint.ENGINE_SCRATCH))
    assert shoe_attrs == set(checkpoint.SHOE_FIELDS) == {f.name for f in dataclasses.fields(Shoe)}
    assert coup_attrs == set(checkpoint.COUP_FIELDS) == {f.name for f in dataclasses.fields(Coup)}
    assert set(checkpoint.COMMIT_FIELDS) == {f.name for f in dataclasses.fields(_Commit)}


@pytest.mark.parametrize(
    "decoder",
    [shoe_ascii.Decoder(), shoe_bin.Decoder(), angel_eye.Decoder(), AutoDecoder()],
    ids=["shoe-ascii", "shoe-bin", "angel-eye", "auto"],
)
def test_the_schema_lists_every_attribute_of_the_decoders(decoder: Any) -> None:
    _, fields = checkpoint.OBJECTS[next(n for n, (c, _) in checkpoint.OBJECTS.items() if c is type(decoder))]
    assert set(vars(decoder)) == set(fields), "a new decoder attribute: add it to controller/checkpoint.py"
    seq = getattr(decoder, "_seq", None)
    if seq is not None:
        name = next(n for n, (c, _) in checkpoint.OBJECTS.items() if c is type(seq))
        assert set(type(seq).__slots__) == set(checkpoint.OBJECTS[name][1])


# ----------------------------------------------------------- the size bound


def test_a_checkpoint_of_a_coup_holding_the_most_frames_stays_under_256_kib() -> None:
    e = Engine("T01", load_profile("punto_banco", {"correction_deadline_s": 86400.0}), 12)
    frames: list[Frame] = [Hello(T0, 0, "F", "1", "1"), Button(T0, 1, "NEWSHOE"), Card(T0, 2, "AS")]
    frames += [Card(T0, 3, "2S")]  # the burn
    frames += [Card(T0, 4, "3S"), Card(T0, 5, "4S"), Card(T0, 6, "5S"), Card(T0, 7, None)]
    for f in frames:  # an unread B2: where the next card goes is unknown
        e.feed(f)
    n = 8
    e.feed(Card(T0 + n, n, "KD"))
    assert e.shoe is not None and e.shoe.current is not None and e.shoe.current.held is not None
    n += 1
    while len(e.shoe.current.held) < MAX_HELD:
        e.feed(Card(T0 + n, n, "KD" if n % 2 else "QH", face_up=True, deck=12, hand="P1"))
        n += 1
    size = len(checkpoint.dump(n, e, shoe_ascii.Decoder()).encode())
    assert len(e.shoe.current.held) == MAX_HELD
    assert 50_000 < size < 256 * 1024, size


# --------------------------------------------------- the daemon's fallback


def _config(tmp_path: Path, path: Path) -> Any:
    st_ = settings_for(path, ReplayOptions())
    cfg = {
        "table": st_["table"],
        "profile": st_["profile"],
        "decks": st_["decks"],
        "device": {"driver": "serial", "port": "/dev/null", "protocol": st_["protocol"]},
        "journal": str(tmp_path / "journal.sqlite3"),
        "odds": True,
        "outputs": {"stdout": False},
    }
    tmp_path.mkdir(exist_ok=True)
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(cfg))
    return load_config(file)


def _live(tmp_path: Path, capture: Path) -> tuple[Any, list[Record], list[str], str]:
    """The capture fed live through a daemon, checkpointed halfway: its
    config, the records, the events stored, and its final checkpoint."""
    cfg = _config(tmp_path, capture)
    records = [r for r in read_shoelog(capture) if isinstance(r, Record) and r.direction == "<"]
    with Journal(cfg.journal) as journal:
        d = Daemon(cfg)
        d.journal = journal
        d._rebuild(journal)
        for i, r in enumerate(records):
            d._input(r.t, "rx", r.data)
            if i == len(records) // 2:
                d._checkpoint(journal)
        stored = [p.json for p in journal.events_since(0)]
        assert d.engine is not None
        final = checkpoint.dump(0, d.engine, d.decoder)
    return cfg, records, stored, final


def _bad(kind: str, good: str) -> str:
    if kind == "another version":
        doc = json.loads(good)
        doc["version"] = checkpoint.VERSION + 1
        return json.dumps(doc)
    if kind == "corrupted":
        i = good.index('"seq":') + 6
        return good[:i] + "9" + good[i:]  # still JSON, its digest no longer matches
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "failing validation":
        doc = json.loads(good)
        doc["body"]["engine"]["seq"] = "many"
        doc["sha256"] = __import__("hashlib").sha256(checkpoint._canonical(doc["body"])).hexdigest()
        return json.dumps(doc)
    # a checkpoint of an older release: a base64 pickle
    return base64.b64encode(pickle.dumps((3, {"seq": 1}))).decode()


@pytest.mark.parametrize(
    "kind", ["another version", "corrupted", "truncated", "failing validation", "a pickle"]
)
def test_an_unusable_checkpoint_is_ignored_and_the_journal_re_fed_to_the_same_state(
    tmp_path: Path, kind: str
) -> None:
    capture = next(p for p in CAPTURES if p.stem == "x_sequence_gap")
    cfg, _records, stored, final = _live(tmp_path / "live", capture)
    # a second journal holding only the inputs (the events lost in a crash)
    # and the unusable checkpoint
    crash = _config(tmp_path / "crash", capture)
    with Journal(cfg.journal) as live, Journal(crash.journal) as journal:
        good = live.get_meta(CHECKPOINT_KEY)
        assert good is not None and json.loads(good)["version"] == checkpoint.VERSION
        for rec in live.inputs_since(0):
            journal.append_input(rec.t, rec.kind, rec.data)
        journal.set_meta(CHECKPOINT_KEY, _bad(kind, good))
        d = Daemon(crash)
        with structlog.testing.capture_logs() as logs:
            d._rebuild(journal)
        rebuilt = [p.json for p in journal.events_since(0)]
        assert d.engine is not None
        assert checkpoint.dump(0, d.engine, d.decoder) == final
    assert rebuilt == stored
    ignored = [e for e in logs if "checkpoint ignored" in e["event"]]
    assert len(ignored) == 1, logs
    assert ignored[0]["log_level"] == "warning" and ignored[0]["reason"]
    assert ignored[0]["inputs_from"] == 1


def test_a_usable_checkpoint_is_continued_from(tmp_path: Path) -> None:
    capture = next(p for p in CAPTURES if p.stem == "x_sequence_gap")
    cfg, _records, stored, final = _live(tmp_path, capture)
    with Journal(cfg.journal) as journal:
        d = Daemon(cfg)
        with structlog.testing.capture_logs() as logs:
            d._rebuild(journal)
        assert d.engine is not None
        assert checkpoint.dump(0, d.engine, d.decoder) == final
        assert [p.json for p in journal.events_since(0)] == stored
    assert not [e for e in logs if "checkpoint ignored" in e["event"]]
    (rebuilt,) = [e for e in logs if e["event"] == "rebuilt from journal"]
    assert rebuilt["checkpoint_input"] > 0 and rebuilt["events_recovered"] == 0


def test_a_checkpoint_for_another_deck_count_is_ignored() -> None:
    profile = load_profile("punto_banco")
    e = Engine("T01", profile, 8)
    text = checkpoint.dump(1, e, None)
    with pytest.raises(checkpoint.CheckpointError, match="config"):
        checkpoint.load(text, lambda: Engine("T01", profile, 6), lambda: None)
    with pytest.raises(checkpoint.CheckpointError, match="decoder"):
        checkpoint.load(
            checkpoint.dump(1, e, shoe_bin.Decoder()), lambda: Engine("T01", profile, 8), shoe_ascii.Decoder
        )


def test_an_unusable_checkpoint_over_pruned_inputs_rebuilds_the_state_and_issues_no_id_twice(
    tmp_path: Path,
) -> None:
    # Retention pruned the first inputs (below an older checkpoint): the
    # events cannot be reproduced under their ids. The inputs kept are
    # re-fed for the state; nothing is stored again, nothing conflicts, and
    # the next event's seq is above every seq the journal issued.
    capture = next(p for p in CAPTURES if p.stem == "x_sequence_gap")
    cfg, records, stored, _ = _live(tmp_path / "live", capture)
    crash = _config(tmp_path / "crash", capture)
    with Journal(cfg.journal) as live, Journal(crash.journal) as journal:
        good = live.get_meta(CHECKPOINT_KEY)
        assert good is not None
        for rec in live.inputs_since(0):
            journal.append_input(rec.t, rec.kind, rec.data)
        journal.append_events([json.loads(p) for p in stored])
        journal._db.execute("DELETE FROM inputs WHERE id < 3")
        journal.set_meta(CHECKPOINT_KEY, _bad("another version", good))
        last = journal.last_seq()
        d = Daemon(crash)
        d.journal = journal
        with structlog.testing.capture_logs() as logs:
            d._rebuild(journal)
        assert [p.json for p in journal.events_since(0)] == stored
        assert d.engine is not None and d.engine.seq == last
        d._input(records[-1].t + 1, "link", b"0gone")
        (new,) = [json.loads(p.json) for p in journal.events_since(last)]
    assert new["seq"] == last + 1
    (ignored,) = [e for e in logs if "checkpoint ignored" in e["event"]]
    assert ignored["inputs_from"] == 3
    assert ignored["events"] == f"not re-stored: inputs before 3 were pruned, seqs carry on above {last}"
