"""A config change between two starts: the daemon always
starts, the shoe in progress finishes under the settings it started with,
the new ones apply from the next shoe, and a rebuild reproduces every stored
event under the settings in force when it was made.

Every key of the config model is classified in one place
(``controller.settings``); each key that reaches the engine or the decoder
is changed here between two starts of an in-process daemon dealing a
capture of two shoes cut in the middle of the first: once after a clean
stop, once as after ``kill -9`` (no checkpoint covering what was dealt: the
next start re-feeds every input). Before this, such a change failed every
start with ``DAEMON FAILED re-feeding the journal`` (``JournalConflict``).
"""

from __future__ import annotations

import functools
import io
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from controller import settings
from controller.config import Config, RulesOverrides, load_config
from controller.daemon import CHECKPOINT_KEY, Daemon
from controller.engine import Engine
from controller.engine.settings import EngineSettings
from controller.journal import HWM_SUFFIX
from controller.rules import load_profile
from controller.shoelog import ShoelogWriter, device_reads
from drivers.fake import FakeShoe
from drivers.replay import ReplayDriver
from tests.support.signed import unsigned_line

#: For every key that reaches the engine or the decoder: another valid value
#: than its default (a key added to the model without one here fails
#: ``test_every_key_that_reaches_the_engine_has_a_value_to_change_to``).
OTHER_VALUE: dict[str, Any] = {
    "profile": "ez_baccarat",
    "decks": 6,
    "odds": False,  # (default true)
    "advantage_threshold": 0.05,
    "rules.burn": "decks",
    "rules.cut_card_min": 20,
    "rules.after_cut": "last",
    "rules.coup_boundary": "auto",
    "rules.demo_coups": 2,
    "rules.correction_deadline_s": 30.0,
    "rules.extra_card": "void",
    "device.protocol": "auto",
    "device.baudrate": 4800,
}

#: where a changed engine key shows in ``shoe.started``'s ``rules``
SHOWN_AS = {k: k.removeprefix("rules.") for k in settings.ENGINE_KEYS}

#: the capture's read at which the daemon stops: in the middle of shoe 1
CUT_AT = 25


# --------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two 1-deck shoes: ``a``, shoe 1's first reads; ``b``, the rest of
    shoe 1 and shoe 2; ``c``, no read at all (a start with nothing dealt)."""
    d = tmp_path_factory.mktemp("captures")
    reads = list(FakeShoe(seed=3, decks=1, shoes=2, cut_card_min=12, cards_per_second=1).stream())
    assert sum(b"NEWSHOE" in data for _, data in reads[CUT_AT:]) == 1  # shoe 2 starts in b
    out = {}
    for name, part in (("a", reads[:CUT_AT]), ("b", reads[CUT_AT:]), ("c", [])):
        path = d / f"{name}.shoelog"
        with path.open("w", encoding="utf-8") as fh:
            w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T01"})
            for t, data in part:
                w.write(t, "<", data)
        out[name] = path
    return out


def _config(tmp_path: Path, part: Path, values: Mapping[str, Any]) -> Config:
    """A table's config dealing ``part`` (a replayed capture, or for
    ``device.baudrate`` a serial device whose reads are the capture's),
    with ``values`` (dotted keys) set."""
    device: dict[str, Any] = {"driver": "replay", "file": str(part), "protocol": "shoe-ascii/1"}
    if "device.baudrate" in values:
        device = {"driver": "serial", "port": "/dev/null", "protocol": "angel-eye/2"}
    data: dict[str, Any] = {
        "table": "T01",
        "device": device,
        "journal": str(tmp_path / "journal.sqlite3"),
        "odds": False,
        "outputs": {"stdout": False, "jsonl": str(tmp_path / "events.jsonl")},
    }
    for key, value in values.items():
        *parents, last = key.split(".")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def _run(cfg: Config, part: Path) -> tuple[int, list[dict[str, Any]]]:
    driver = ReplayDriver(functools.partial(device_reads, part))
    with structlog.testing.capture_logs() as logs:
        rc = Daemon(cfg, driver=driver, stdout=io.StringIO(), stop_at_eof=True).run()
    critical = [x for x in logs if x["log_level"] == "critical"]
    assert rc == 0 and not critical, critical or logs
    return rc, logs


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    """The events delivered, without what signing added (two runs sign with two keys)."""
    path = tmp_path / "events.jsonl"
    return [json.loads(unsigned_line(x)) for x in path.read_text().splitlines()] if path.exists() else []


def _stored(tmp_path: Path) -> list[tuple[int, str]]:
    if not (tmp_path / "journal.sqlite3").exists():
        return []
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    try:
        return [(int(s), str(j)) for s, j in db.execute("SELECT seq, json FROM events ORDER BY seq")]
    finally:
        db.close()


def _forget_checkpoint(tmp_path: Path) -> None:
    """As after ``kill -9`` with no checkpoint covering what was dealt: the
    next start re-feeds every input."""
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    with db:
        db.execute("DELETE FROM meta WHERE key = ?", (CHECKPOINT_KEY,))
    db.close()


def _before_shoe_2(events: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events before shoe 2's, and shoe 2's ``shoe.started``."""
    started = [e for e in events if e["type"] == "shoe.started"]
    assert len(started) == 2, [e["type"] for e in events]
    second = started[1]
    first_of_2 = min(i for i, e in enumerate(events) if e["shoe"] == second["shoe"])
    return list(events[:first_of_2]), second


def _default(key: str) -> Any:
    if key.startswith("rules."):
        return RulesOverrides.model_fields[key.removeprefix("rules.")].default
    if key == "device.protocol":
        return "shoe-ascii/1"
    if key == "device.baudrate":
        return None
    return Config.model_fields[key].default


# ------------------------------------------------------ the classification


def test_every_config_key_is_classified_once_in_product_code() -> None:
    keys = settings.config_keys()
    assert len(keys) == len(set(keys)) > 30
    groups = [
        set(settings.ENGINE_KEYS),
        set(settings.DECODER_KEYS),
        set(settings.JOURNAL_KEYS),
        set(settings.OTHER_KEYS),
    ]
    classified = set().union(*groups)
    assert sum(len(g) for g in groups) == len(classified), "a key is classified twice"
    assert set(keys) - classified == set(), "a config key nobody said reaches the engine or not"
    assert classified - set(keys) == set(), "a classified key the config no longer has"
    # the rules' overrides all reach the engine (through the profile)
    assert {f"rules.{k}" for k in RulesOverrides.model_fields} <= set(settings.ENGINE_KEYS)


def test_every_key_that_reaches_the_engine_has_a_value_to_change_to() -> None:
    assert set(OTHER_VALUE) == set(settings.ENGINE_KEYS) | set(settings.DECODER_KEYS)
    for key, value in OTHER_VALUE.items():
        assert value != _default(key), key


# ------------------------------------------------- each key, changed between starts


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
@pytest.mark.parametrize("key", list(OTHER_VALUE))
def test_a_changed_key_applies_from_the_next_shoe_and_every_start_succeeds(
    tmp_path: Path, captures: dict[str, Path], key: str, stop: str
) -> None:
    default = {key: _default(key)}
    if key == "odds":
        default = {"odds": True}
    old_cfg = _config(tmp_path, captures["a"], default)
    _run(old_cfg, captures["a"])
    if stop == "kill -9":
        _forget_checkpoint(tmp_path)

    # started with the key changed, mid-shoe: it starts, and says so in one line
    new_cfg = _config(tmp_path, captures["b"], {key: OTHER_VALUE[key]})
    _, logs = _run(new_cfg, captures["b"])
    lines = [x for x in logs if x["event"].startswith("config changed: ")]
    assert len(lines) == 1, logs
    assert key in lines[0]["changed"] and key in lines[0]["event"]
    if key in settings.ENGINE_KEYS:
        assert lines[0]["event"].endswith(
            "; the shoe in progress finishes under the journal's settings, the new ones apply from the"
            " next shoe"
        )
        assert lines[0]["applies"] == "next shoe"
    else:
        assert "applies at once" in lines[0]["event"]

    events = _events(tmp_path)
    stored = _stored(tmp_path)
    assert [e["seq"] for e in events] == [s for s, _ in stored]
    if key in settings.ENGINE_KEYS:
        # shoe 1 finished under the settings it started with: exactly the
        # events of a table dealt through without a change
        ref = tmp_path / "reference"
        ref.mkdir()
        _run(_config(ref, captures["a"], default), captures["a"])
        _run(_config(ref, captures["b"], default), captures["b"])
        before, started = _before_shoe_2(events)
        ref_before, ref_started = _before_shoe_2(_events(ref))
        assert before == ref_before
        assert "rules" not in ref_started
        # and shoe 2 is dealt under the new ones, which its shoe.started says
        rules = started["rules"]
        assert rules[SHOWN_AS[key]] == OTHER_VALUE[key]
        assert SHOWN_AS[key] in rules["changed"]
        assert {k: started[k] for k in ("decks", "profile")} == {
            "decks": rules["decks"],
            "profile": rules["profile"],
        }

    # a third start (and a rebuild from the first input): the same events,
    # nothing re-stored, no change to report
    if stop == "kill -9":
        _forget_checkpoint(tmp_path)
    _, logs = _run(_config(tmp_path, captures["c"], {key: OTHER_VALUE[key]}), captures["c"])
    assert not [x for x in logs if x["event"].startswith("config changed")]
    assert not [x for x in logs if "checkpoint ignored" in x["event"]]
    rebuilt = [x for x in logs if x["event"] == "rebuilt from journal"]
    assert all(x["events_recovered"] == 0 for x in rebuilt)
    assert _stored(tmp_path) == stored


def test_changes_back_and_forth_at_every_start_never_stop_the_daemon(
    tmp_path: Path, captures: dict[str, Path]
) -> None:
    """Any sequence of changes, with and without checkpoints, mid-shoe and
    between shoes: every start succeeds and re-feeding reproduces the
    journal exactly."""
    plan = [
        ({"odds": True}, "a", False),
        ({"odds": False, "decks": 6}, "c", False),
        ({"odds": True, "profile": "baccarat_27"}, "c", True),
        ({"odds": True, "rules.burn": "fixed:3"}, "b", True),
        ({"odds": False}, "c", False),
        ({"odds": True}, "c", True),
    ]
    for values, part, forget in plan:
        if forget:
            _forget_checkpoint(tmp_path)
        before = _stored(tmp_path)
        _run(_config(tmp_path, captures[part], values), captures[part])
        after = _stored(tmp_path)
        assert after[: len(before)] == before
    # and from the first input, under the config of the last start
    _forget_checkpoint(tmp_path)
    stored = _stored(tmp_path)
    _run(_config(tmp_path, captures["c"], {"odds": True}), captures["c"])
    assert _stored(tmp_path) == stored


def test_a_change_with_no_shoe_in_progress_applies_at_once(tmp_path: Path, captures: dict[str, Path]) -> None:
    """Started with nothing dealt yet: the first shoe is dealt under the
    new settings, and announces them."""
    _run(_config(tmp_path, captures["c"], {"decks": 8}), captures["c"])
    _, logs = _run(_config(tmp_path, captures["a"], {"decks": 6}), captures["a"])
    (line,) = [x for x in logs if x["event"].startswith("config changed: ")]
    assert line["event"] == "config changed: decks; no shoe in progress: the new settings apply at once"
    (started,) = [e for e in _events(tmp_path) if e["type"] == "shoe.started"]
    assert started["decks"] == 6 and started["rules"]["changed"] == ["decks"]


def test_a_journal_of_another_table_is_refused_in_one_line_even_without_its_mark(
    tmp_path: Path, captures: dict[str, Path]
) -> None:
    _run(_config(tmp_path, captures["a"], {}), captures["a"])
    Path(str(tmp_path / "journal.sqlite3") + HWM_SUFFIX).unlink()
    other = _config(tmp_path, captures["c"], {"table": "T02"})
    for _ in range(2):
        with structlog.testing.capture_logs() as logs:
            assert Daemon(other, stdout=io.StringIO(), stop_at_eof=True).run() == 1
        (line,) = [x for x in logs if x["log_level"] == "critical"]
        assert line["event"] == "journal refused: the daemon does not start"
        assert "belongs to table T01 (its settings history says so), not T02" in line["error"]
        assert "set table back to T01" in line["error"]


def test_inputs_pruned_below_an_unusable_checkpoint_rebuild_the_state_under_the_settings_then(
    tmp_path: Path, captures: dict[str, Path]
) -> None:
    """Retention pruned the first inputs and the checkpoint cannot be used:
    the inputs kept are re-fed for the state only, under the settings in
    force from before them; a changed config still starts."""
    _run(_config(tmp_path, captures["a"], {}), captures["a"])
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    with db:
        db.execute("DELETE FROM inputs WHERE id < 10")
        db.execute("UPDATE meta SET value = 'damaged' WHERE key = ?", (CHECKPOINT_KEY,))
    db.close()
    stored = _stored(tmp_path)
    _, logs = _run(_config(tmp_path, captures["b"], {"decks": 6}), captures["b"])
    assert [x for x in logs if "checkpoint ignored" in x["event"]]
    assert [x for x in logs if x["event"].startswith("config changed: decks")]
    assert _stored(tmp_path)[: len(stored)] == stored
    _run(_config(tmp_path, captures["c"], {"decks": 6}), captures["c"])


def test_a_journal_written_before_settings_were_journalled_is_taken_under_the_config(
    tmp_path: Path, captures: dict[str, Path]
) -> None:
    """An upgrade: the journal has no settings history (and its checkpoint
    is of an older version): its inputs are taken as dealt under the config,
    with a warning; what they made is reproduced as it was stored."""
    _run(_config(tmp_path, captures["a"], {}), captures["a"])
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    with db:
        db.execute("DELETE FROM meta WHERE key IN ('settings_history', ?)", (CHECKPOINT_KEY,))
    db.close()
    stored = _stored(tmp_path)
    _, logs = _run(_config(tmp_path, captures["b"], {}), captures["b"])
    assert [x for x in logs if x["event"].startswith("journal settings history begun")]
    assert _stored(tmp_path)[: len(stored)] == stored


# ------------------------------------------------------------ the engine alone


def _settings(**kw: Any) -> EngineSettings:
    profile = load_profile(kw.pop("profile", "punto_banco"), kw.pop("rules", None))
    return EngineSettings(profile, kw.pop("decks", 8), **kw)


def test_the_engine_takes_new_settings_at_once_with_no_shoe_and_at_the_next_shoe_otherwise() -> None:
    from tests.table import Table

    tb = Table()
    assert tb.engine.reconfigure(_settings(decks=6)) is True  # no shoe yet
    assert tb.engine.decks == 6
    tb.start()
    (started,) = tb.of_type("shoe.started")
    assert started["decks"] == 6 and started["rules"]["changed"] == ["decks"]
    # a shoe in progress: it finishes under its settings
    assert tb.engine.reconfigure(_settings(decks=6, odds=True)) is False
    assert tb.engine.odds is False and tb.engine.next_settings is not None
    tb.new_shoe()
    assert tb.engine.odds is True and tb.engine.next_settings is None
    tb.cards("AS", "2C")
    assert tb.of_type("shoe.started")[-1]["rules"]["changed"] == ["odds"]
    # back to the settings in force before the next shoe: nothing waits
    assert tb.engine.reconfigure(_settings(decks=4)) is False
    assert tb.engine.reconfigure(_settings(decks=6, odds=True)) is False
    assert tb.engine.next_settings is None


def test_the_settings_digest_tells_profiles_apart_by_their_tables() -> None:
    a, b = _settings(), _settings(rules={"burn": "decks"})
    assert a.digest == _settings().digest != b.digest
    assert len({_settings(profile=p).digest for p in ("punto_banco", "ez_baccarat", "baccarat_27")}) == 3
    e = Engine("T01", load_profile("punto_banco"), 8)
    assert e.settings.digest == a.digest
