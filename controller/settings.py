"""Which config keys reach the engine, and the settings the journal keeps.

Every key of the config (``controller.config.Config``, walked by
``config_keys``) is classified here, in one place:

* ``ENGINE_KEYS`` reach the engine (the profile and its rules, the deck
  count, odds and the advantage threshold): they decide the events a
  journal's inputs make. A change applies from the next shoe (the shoe in
  progress finishes under the settings it started with:
  ``controller.engine.settings``);
* ``DECODER_KEYS`` reach the decoder (how the device's bytes are read): a
  change applies at once, from the first read after the start (the device
  speaks the new protocol now);
* ``JOURNAL_KEYS`` name whose journal it is (``table``): a journal of
  another table is refused;
* ``OTHER_KEYS`` reach neither (the device's connection, outputs, paths,
  retention, metrics).

The journal keeps the history of the settings in force, in its ``meta``
table (key ``settings_history``): one entry per change, each with the id of
the last input applied before it (``after``). Re-feeding the journal applies
each entry where it was applied live, so a rebuild reproduces the stored
events exactly, whatever the config says now. An entry holds the profile
whole (``rules.profile_document``), so a profile file edited since changes
nothing of the past either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel

from controller.config import Config, RulesOverrides, _model_classes
from controller.engine.settings import EngineSettings
from controller.journal import Journal, JournalRefused
from controller.rules import profile_document, profile_from_document

#: The config keys that reach the engine.
ENGINE_KEYS: tuple[str, ...] = (
    "profile",
    "decks",
    "odds",
    "advantage_threshold",
    *(f"rules.{k}" for k in RulesOverrides.model_fields),
)
#: The config keys that reach the decoder (``baudrate``: angel-eye/2's timing).
DECODER_KEYS: tuple[str, ...] = ("device.protocol", "device.baudrate")
#: The key naming whose journal it is: another value is refused.
JOURNAL_KEYS: tuple[str, ...] = ("table",)
#: The config keys that reach neither the engine nor the decoder.
OTHER_KEYS: frozenset[str] = frozenset(
    {
        "device.driver",
        "device.port",
        "device.vendor_id",
        "device.product_id",
        "device.serial_number",
        "device.seed",
        "device.cards_per_second",
        "device.faults",
        "device.file",
        "device.realtime",
        "journal",
        "journal_retention_days",
        "journal_max_mb",
        "signing",
        "signing_key",
        "metrics",
        "outputs.stdout",
        "outputs.jsonl",
        "outputs.mqtt.host",
        "outputs.mqtt.port",
        "outputs.mqtt.brokers.host",
        "outputs.mqtt.brokers.port",
        "outputs.mqtt.client_id",
        "outputs.mqtt.username",
        "outputs.mqtt.password_file",
        "outputs.mqtt.tls.ca_file",
        "outputs.mqtt.tls.cert_file",
        "outputs.mqtt.tls.key_file",
        "outputs.mqtt.topic_prefix",
        "outputs.mqtt.protocol",
        "outputs.mqtt.command_key_file",
        "outputs.mqtt.archive_ack",
        "outputs.mqtt.reoffer_after_s",
    }
)

META_KEY = "settings_history"
FORMAT = "shoe-controller/settings"
VERSION = 1


def config_keys(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every key of ``model`` as a dotted path, through its nested models
    (the device's drivers merged: ``device.protocol`` is one key)."""
    keys: list[str] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = _model_classes(info.annotation)
        if not nested:
            keys.append(path)
            continue
        for cls in nested:
            for key in config_keys(cls, f"{path}."):
                if key not in keys:
                    keys.append(key)
    return keys


def _value(cfg: Config, key: str) -> Any:
    obj: Any = cfg
    for part in key.split("."):
        obj = getattr(obj, part, None)
    return obj


class Entry(NamedTuple):
    """One entry of the history: settings in force from after input ``after``."""

    serial: int
    after: int
    doc: dict[str, Any]  # {"serial", "after", "engine", "decoder", "keys"}

    @property
    def decoder(self) -> dict[str, Any]:
        return dict(self.doc["decoder"])


def wanted(cfg: Config, protocol: str) -> dict[str, Any]:
    """The settings ``cfg`` asks for, in the journal's form (without
    ``serial`` and ``after``); ``protocol``: the device's, resolved (a
    replayed capture's own). Raises ``ConfigError`` for a profile that
    cannot be read."""
    keys = {k: _value(cfg, k) for k in (*ENGINE_KEYS, *DECODER_KEYS)}
    keys["device.protocol"] = protocol
    baud = getattr(cfg.device, "baudrate", None)
    return {
        "engine": {
            "profile": profile_document(cfg.profile, cfg.rules.overrides() or None),
            "decks": cfg.decks,
            "odds": cfg.odds,
            "advantage_threshold": cfg.advantage_threshold,
        },
        "decoder": {"protocol": protocol, "baud": baud},
        "keys": keys,
    }


def engine_settings(doc: Mapping[str, Any]) -> EngineSettings:
    """The engine's settings of an entry (``ValueError``/``ConfigError`` if
    it is not one)."""
    e = doc["engine"]
    decks, odds, threshold = e["decks"], e["odds"], e["advantage_threshold"]
    if not isinstance(decks, int) or isinstance(decks, bool) or not isinstance(odds, bool):
        raise ValueError("engine settings: decks or odds of the wrong kind")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool):
        raise ValueError("engine settings: advantage_threshold is not a number")
    return EngineSettings(profile_from_document(e["profile"]), decks, odds, float(threshold), doc=dict(doc))


def digest(doc: Mapping[str, Any]) -> str:
    """What an entry's engine and decoder settings are, in one string."""
    text = json.dumps({"engine": doc["engine"], "decoder": doc["decoder"]}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def changed_keys(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The config keys whose change makes ``now`` other settings than
    ``before`` ([] when they are the same settings)."""
    same_engine = engine_settings(before).digest == engine_settings(now).digest
    same_decoder = before["decoder"] == now["decoder"]
    if same_engine and same_decoder:
        return []
    old, new = before.get("keys", {}), now["keys"]
    keys = [k for k in new if old.get(k) != new[k]]
    if not same_engine and not any(k in ENGINE_KEYS for k in keys):
        keys.insert(0, "profile")  # the same name: its file's content changed
    if not same_decoder and not any(k in DECODER_KEYS for k in keys):
        keys.append("device.protocol")
    return keys


class History:
    """The journal's settings history (``META_KEY``)."""

    def __init__(self, table: str, entries: list[Entry], note: str | None = None) -> None:
        self.table = table
        self.entries = entries
        #: why it was begun now, or could not be read (for a warning)
        self.note = note

    @classmethod
    def load(cls, journal: Journal, table: str) -> History:
        """The history the journal keeps, or an empty one (a new journal,
        one from before this history, or one whose history cannot be read:
        ``note`` says). ``JournalRefused`` if it belongs to another table."""
        raw = journal.get_meta(META_KEY)
        if raw is None:
            return cls(table, [])
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT or data.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} version {VERSION} document")
            owner = data["table"]
            entries = [Entry(int(d["serial"]), int(d["after"]), dict(d)) for d in data["entries"]]
            for e in entries:
                engine_settings(e.doc)
                if not isinstance(e.decoder["protocol"], str):
                    raise ValueError("entry without its decoder's protocol")
        except Exception as exc:  # anything unreadable: begun again, and said so
            return cls(table, [], note=f"the journal's settings history cannot be read ({str(exc)[:200]})")
        if owner != table:
            raise JournalRefused(
                f"journal {journal.path} belongs to table {str(owner)[:40]} (its settings history says"
                f" so), not {table}: give every table its own journal, or set table back to"
                f" {str(owner)[:40]}"
            )
        return cls(table, entries)

    def record(self, journal: Journal, doc: Mapping[str, Any], after: int) -> Entry:
        """A new entry: ``doc``'s settings from after input ``after``,
        stored durably. Entries no kept input can need are dropped (all
        but the last applied before the first input kept)."""
        serial = self.entries[-1].serial + 1 if self.entries else 1
        after = max(after, self.entries[-1].after if self.entries else 0)
        entry = Entry(serial, after, {**doc, "serial": serial, "after": after})
        entries = [*self.entries, entry]
        first = journal.first_input_id()
        if first > 1:
            older = [e for e in entries if e.after < first]
            entries = [*older[-1:], *(e for e in entries if e.after >= first)]
        self.entries = entries
        body = {
            "format": FORMAT,
            "version": VERSION,
            "table": self.table,
            "entries": [e.doc for e in entries],
        }
        journal.set_meta(META_KEY, json.dumps(body, separators=(",", ":"), allow_nan=False))
        return entry

    def by_serial(self, serial: int) -> Entry | None:
        for e in self.entries:
            if e.serial == serial:
                return e
        return None

    def in_force_at(self, first: int) -> Entry:
        """The entry to start a rebuild from when inputs begin at ``first``:
        the last applied before it (the first entry, with every input kept)."""
        before = [e for e in self.entries if e.after < max(first, 1)]
        return before[-1] if before else self.entries[0]
