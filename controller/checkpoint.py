"""Engine checkpoints: an explicit, versioned JSON document (no pickle).

A checkpoint is what the daemon needs to continue after a crash without
re-feeding the whole journal: the id of the last journal input it covers,
the engine's game state and the decoder's partial-frame and sequence state.
It is written to the journal's ``meta`` table (key ``engine_checkpoint``)
once per shoe and every 500 inputs (``controller.daemon``).

Format (``VERSION`` 8), one JSON object::

    {"format": "shoe-controller/checkpoint", "version": 8,
     "sha256": <hex digest of the canonical JSON of "body">,
     "body": {"input": <last journal input id covered>,
              "table": <the table>,
              "settings": {"in_force": <the caller's form of the engine's
                                        settings as JSON text, or null>,
                           "digest": <EngineSettings.digest>},
              "engine": {<ENGINE_FIELDS>},
              "coups": [{<COUP_FIELDS>}, ...],
              "decoder": <object>}}

Values are JSON scalars and arrays, or objects with one tag key:

* ``{"tuple": [...]}``, ``{"set": [...]}`` (sorted), ``{"bytes": "<hex>"}``,
  ``{"map": [[key, value], ...]}`` (insertion order kept, any key type),
  ``{"counter": [[key, n], ...]}``;
* ``{"frame": "<class>", "fields": {...}}``: a decoded frame by its
  dataclass fields (``firmware_protocols.frames``);
* ``{"settings": <JSON text>}``: engine settings (settings waiting for the
  next shoe) in the caller's form (``EngineSettings.doc``, as text: its
  keys keep their order), compiled back by the caller;
* ``{"coup": i}``: the i-th entry of ``body.coups`` (a coup is one object
  wherever it is referred to: the shoe's ``current``, its ``coups``, an
  ``after_premature_void``);
* ``{"object": "<name>", "fields": {...}}``: one of ``Shoe``, ``Commit``,
  ``ShoeComposition`` and the decoders' classes, with exactly the fields
  listed below for it.

The field lists below *are* the schema: a checkpoint whose objects carry
other fields, an unknown tag, another ``format``/``version``, a digest that
does not match, or another table, is refused with :class:`CheckpointError`;
so are settings the caller cannot compile back, and, for a caller that does
not compile them (``settings_of``), settings other than its engine's. The
daemon then ignores it and rebuilds from the journal's inputs. The engine is
restored under the settings it was saved with (the shoe in progress
finishes under them), which the daemon compiles from their saved form. Any change to what is saved (a new
attribute of ``Engine``, ``Shoe``, ``Coup`` or a decoder) must be added here
and ``VERSION`` raised (``tests/test_checkpoint.py`` fails otherwise).

Size: the state of one shoe. The bulk is frames held while positions are
unknown (at most ``MAX_HELD`` = 1,024 per coup, about 100 bytes each), the
shuffler's order (at most 624 cards of 12 decks) and the per-coup lists
bounded by the engine; ``tests/test_checkpoint.py`` measures a coup holding
1,024 frames.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from controller.cards import ShoeComposition
from controller.engine import Coup, Engine, Shoe, _Commit
from controller.engine.machine import CoupState, ShoePhase
from controller.engine.settings import EngineSettings
from firmware_protocols import angel_eye, frames, shoe_ascii, shoe_bin
from firmware_protocols.detect import AutoDecoder

FORMAT = "shoe-controller/checkpoint"
#: 1: the first; 2: the engine's unread ``link_up`` and ``counters`` are no
#: longer saved (they were removed from the engine as dead state); 3: the
#: engine's ``_after_void``, ``_phantom`` and ``_phantom_before`` are gone
#: (always empty between calls: a void coup's held frames are now returned
#: to the void, not passed through the engine), and a coup's ``state``
#: (``controller.engine.machine.CoupState``) is saved; 4: a coup's
#: ``dealing``, ``settled`` and ``premature`` are gone (its ``state`` says
#: them: the state is the source of truth, ``premature`` its open
#: PREMATURE_RESULT), and a shoe's ``ended_emitted`` and ``dealing_over``
#: are gone (its ``phase`` says them: ``ended``, ``dealing-over``); 5: the
#: engine's settings are saved (``body.settings``, and those waiting for the
#: next shoe, ``_next_settings``, with the last announced, ``_announced``):
#: a config change applies from the next shoe; 6: a shoe's
#: ``settled_coups`` (its settled coups' cards and result event ids, which
#: a supervisor's ``correct`` needs) is saved; 8: a shoe's ``unseen_start``
#: (the coup opened after frames lost between coups while its numbering
#: was lost) is saved.
VERSION = 8

#: The engine's state saved. Every other attribute of an ``Engine`` comes
#: from the config it is built with (``ENGINE_CONFIG``) or is scratch
#: (``ENGINE_SCRATCH``), rebuilt by ``Engine.__init__``.
ENGINE_FIELDS = (
    "seq",
    "shoe",
    "device",
    "_advantage",
    "_commit",
    "_fault_coup",
    "_fault_waiting",
    "_lost_after_shoe",
    "_shoe_ids",
    "_lost_frames",
    "_lost_unknown",
    "_loss_at_end",
    "_odds_quiet",
    "_next_settings",
    "_announced",
)
#: the settings (``body.settings``) and what they make, the table and the
#: daemon's choices
ENGINE_CONFIG = (
    "table",
    "settings",
    "profile",
    "decks",
    "odds",
    "roads",
    "advantage_threshold",
    "defer_analytics",
    "rules",
    "tab",
    "deadline_s",
    "button",
)
#: the odds tables (built per profile), the output list of the call in
#: progress, the frame handlers (bound methods), whether a call is in
#: progress, the analytics queued for ``drain_analytics`` (empty between inputs: ``dump``
#: refuses otherwise), the settled outcomes cached (a function of the profile),
#: the roads computed ahead (checked against the results when used)
ENGINE_SCRATCH = ("_calc", "_out", "_handlers", "_running", "_deferred", "_outcomes", "_roads_ahead")

SHOE_FIELDS = (
    "id",
    "t_start",
    "comp",
    "commit",
    "order",
    "phase",
    "first_card",
    "burn_left",
    "burned",
    "next_coup",
    "current",
    "coups",
    "cut_coup",
    "last_coup",
    "coups_count",
    "tally",
    "burned_cards",
    "results",
    "settled_coups",
    "stats",
    "announced",
    "ending",
    "after_premature",
    "after_premature_coup",
    "after_premature_void",
    "past_read",
    "burn_unread",
    "ended_by_rule",
    "numbering_lost",
    "renumber_to",
    "unseen_start",
    "window",
    "loss_mark",
)
COUP_FIELDS = (
    "number",
    "demo",
    "t_start",
    "positions",
    "cards",
    "extras",
    "extras_unlisted",
    "open",
    "corrections",
    "void_code",
    "had_unread",
    "overrun",
    "held",
    "gap_missing",
    "lost_frames",
    "gap_entered",
    "anchor_k",
    "anchor_need",
    "anchor_prev",
    "dealt_at_open",
    "ends",
    "device_result",
    "carry",
    "past",
    "state",
)
COMMIT_FIELDS = ("shoe_id", "ncards", "sha256", "order", "received", "valid")
COMPOSITION_FIELDS = ("decks", "remaining", "dealt")

_SeqTracker = type(shoe_ascii.Decoder()._seq)
_SeqCycle = type(angel_eye.Decoder()._seq)

#: name -> (class, fields saved). The decoders' classes with their partial
#: frame, sequence and drop counts.
OBJECTS: dict[str, tuple[type, tuple[str, ...]]] = {
    "Shoe": (Shoe, SHOE_FIELDS),
    "Commit": (_Commit, COMMIT_FIELDS),
    "ShoeComposition": (ShoeComposition, COMPOSITION_FIELDS),
    "shoe-ascii/1": (shoe_ascii.Decoder, ("stats", "_seq", "_buf", "_skipping")),
    "shoe-bin/1": (shoe_bin.Decoder, ("stats", "_seq", "_buf", "_claimed")),
    "angel-eye/2": (angel_eye.Decoder, ("stats", "_seq", "_last_raw", "_buf", "_claimed")),
    "auto": (AutoDecoder, ("limit", "protocol", "_inner", "_pending", "held", "_own")),
    "SequenceTracker": (_SeqTracker, ("last", "modulus")),
    "SeqCycle": (
        _SeqCycle,
        (
            "msg_s",
            "last",
            "last_t",
            "learned",
            "_order",
            "_succ",
            "_lap_first",
            "_lap_ok",
            "_lap_trouble",
            "_clean_laps",
        ),
    ),
}
_NAMES = {cls: name for name, (cls, _) in OBJECTS.items()}

FRAMES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        frames.Hello,
        frames.Card,
        frames.Button,
        frames.CutCard,
        frames.Status,
        frames.ShuffleCommit,
        frames.ShuffleOrder,
        frames.DeviceResult,
        frames.HostRequest,
        frames.Ack,
        frames.SequenceGap,
        frames.Link,
        frames.Renumbered,  # (a supervisor's number waiting among held frames)
        frames.DeviceSeen,  # (a HELLO or a fault that came while frames were held)
    )
}

_SCALARS = (str, int, float, bool, type(None))


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, of another format or
    version, damaged, of another table, or of settings that cannot be used."""


class _Writer:
    def __init__(self) -> None:
        self.coups: list[dict[str, Any]] = []
        self._index: dict[int, int] = {}

    def value(self, v: Any) -> Any:
        if isinstance(v, _SCALARS):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return {"tuple": [self.value(x) for x in v]}
        if isinstance(v, collections.Counter):
            return {"counter": [[self.value(k), n] for k, n in v.items()]}
        if isinstance(v, dict):
            return {"map": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, (set, frozenset)):
            return {"set": sorted(self.value(x) for x in v)}
        if isinstance(v, bytes):
            return {"bytes": v.hex()}
        if isinstance(v, Coup):
            return {"coup": self.coup(v)}
        if isinstance(v, EngineSettings):
            return {"settings": _settings_doc(v)}
        cls = type(v)
        if cls in _NAMES:
            return self.obj(v)
        if cls.__name__ in FRAMES and FRAMES[cls.__name__] is cls:
            return {
                "frame": cls.__name__,
                "fields": {f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)},
            }
        raise TypeError(f"checkpoint: no schema for a {cls.__qualname__}")

    def obj(self, v: Any) -> dict[str, Any]:
        name = _NAMES[type(v)]
        return {"object": name, "fields": {f: self.value(getattr(v, f)) for f in OBJECTS[name][1]}}

    def coup(self, c: Coup) -> int:
        i = self._index.get(id(c))
        if i is None:
            i = self._index[id(c)] = len(self.coups)
            self.coups.append({})  # reserved: a coup may refer to itself
            self.coups[i] = {f: self.value(getattr(c, f)) for f in COUP_FIELDS}
        return i


def _settings_doc(s: EngineSettings) -> str:
    """The caller's form of settings, as JSON text: kept as it is (the
    body's canonical form sorts keys; a profile's bets keep their order)."""
    if s.doc is None:
        raise TypeError("checkpoint: engine settings without the caller's form of them (EngineSettings.doc)")
    return json.dumps(s.doc, separators=(",", ":"), allow_nan=False)


def _canonical(body: Any) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def dump(after: int, engine: Engine, decoder: Any) -> str:
    """The checkpoint of ``engine`` and ``decoder`` after journal input ``after``."""
    if engine._deferred:
        # queued analytics are not state: the checkpoint would lose them
        raise ValueError("engine checkpoint with analytics not drained (call drain_analytics first)")
    w = _Writer()
    s = engine.settings
    body = {
        "input": after,
        "table": engine.table,
        "settings": {"in_force": None if s.doc is None else _settings_doc(s), "digest": s.digest},
        "engine": {f: w.value(getattr(engine, f)) for f in ENGINE_FIELDS},
        "decoder": w.value(decoder),
        "coups": w.coups,
    }
    text = _canonical(body)
    head = {"format": FORMAT, "version": VERSION, "sha256": hashlib.sha256(text).hexdigest()}
    return json.dumps(head, separators=(",", ":"))[:-1] + ',"body":' + text.decode() + "}"


SettingsOf = Callable[[Mapping[str, Any]], EngineSettings]


class _Reader:
    def __init__(self, coups: Any, settings_of: SettingsOf | None) -> None:
        if not isinstance(coups, list):
            raise CheckpointError("coups is not a list")
        self._settings_of = settings_of
        self._raw = coups
        self._coups: list[Coup | None] = [None] * len(coups)

    def value(self, v: Any) -> Any:
        if isinstance(v, _SCALARS):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            raise CheckpointError(f"not a checkpoint value: {str(v)[:60]}")
        keys = set(v)
        if keys == {"frame", "fields"}:
            cls = FRAMES.get(v["frame"])
            if cls is None:
                raise CheckpointError(f"unknown frame type {v['frame']!r}")
            names = {f.name for f in dataclasses.fields(cls)}
            given = _fields(v["fields"], names, v["frame"])
            return cls(**{k: self.value(x) for k, x in given.items()})
        if keys == {"object", "fields"}:
            entry = OBJECTS.get(v["object"])
            if entry is None:
                raise CheckpointError(f"unknown object {v['object']!r}")
            cls, wanted = entry
            given = _fields(v["fields"], set(wanted), v["object"])
            out: Any = object.__new__(cls)
            for k in wanted:
                object.__setattr__(out, k, self.value(given[k]))
            if cls is Shoe:
                try:  # (saved as its string: the engine compares phases by identity)
                    out.phase = ShoePhase(out.phase)
                except ValueError:
                    raise CheckpointError(f"no shoe phase {str(out.phase)[:60]!r}") from None
            return out
        if len(keys) != 1:
            raise CheckpointError(f"not a checkpoint value: {str(v)[:60]}")
        if "tuple" in v:
            return tuple(self.value(x) for x in _list(v["tuple"]))
        if "set" in v:
            return {self.value(x) for x in _list(v["set"])}
        if "bytes" in v:
            return bytes.fromhex(v["bytes"])
        if "map" in v:
            return {self.value(k): self.value(x) for k, x in (_pair(p) for p in _list(v["map"]))}
        if "counter" in v:
            return collections.Counter(
                {self.value(k): _int(n) for k, n in (_pair(p) for p in _list(v["counter"]))}
            )
        if "coup" in v:
            return self.coup(_int(v["coup"]))
        if "settings" in v:
            return _settings(v["settings"], self._settings_of)
        raise CheckpointError(f"unknown tag {next(iter(v))!r}")

    def coup(self, i: int) -> Coup:
        if not 0 <= i < len(self._raw):
            raise CheckpointError(f"coup {i} is not in the checkpoint")
        c = self._coups[i]
        if c is None:
            c = self._coups[i] = Coup.__new__(Coup)
            given = _fields(self._raw[i], set(COUP_FIELDS), "Coup")
            for k in COUP_FIELDS:
                setattr(c, k, self.value(given[k]))
            try:  # (saved as its string: the engine compares states by identity)
                c.state = CoupState(c.state)
            except ValueError:
                raise CheckpointError(f"coup {i}: no state {str(c.state)[:60]!r}") from None
        return c


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise CheckpointError(f"expected a list, not {str(v)[:60]}")
    return v


def _pair(v: Any) -> tuple[Any, Any]:
    if not isinstance(v, list) or len(v) != 2:
        raise CheckpointError(f"expected a pair, not {str(v)[:60]}")
    return v[0], v[1]


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise CheckpointError(f"expected an integer, not {str(v)[:60]}")
    return v


def _settings(text: Any, settings_of: SettingsOf | None) -> EngineSettings:
    if settings_of is None:
        raise CheckpointError("holds engine settings, and no way to compile them was given")
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        raise CheckpointError(f"settings are not an object's JSON text: {str(text)[:60]}")
    try:
        return settings_of(doc)
    except CheckpointError:
        raise
    except Exception as exc:  # whatever the caller's compiler refuses
        raise CheckpointError(f"settings that cannot be used: {str(exc)[:200]}") from None


def _fields(v: Any, wanted: set[str], what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise CheckpointError(f"{what}: fields are not an object")
    if set(v) != wanted:
        missing, extra = sorted(wanted - set(v)), sorted(set(v) - wanted)
        raise CheckpointError(f"{what}: fields differ from the schema (missing {missing}, unknown {extra})")
    return v


def load(
    text: str,
    new_engine: Callable[..., Engine],
    new_decoder: Callable[[], Any] | None,
    *,
    settings_of: SettingsOf | None = None,
) -> tuple[int, Engine, Any]:
    """The journal input id, engine and decoder a checkpoint holds, the
    engine given the saved state. :class:`CheckpointError` if it cannot be
    used.

    With ``settings_of`` (the caller's compiler of its form of settings),
    the engine is ``new_engine(settings)`` under the settings saved; without
    it, ``new_engine()``, whose settings must be those saved. The decoder
    must be of ``new_decoder()``'s class (None: the caller checks it)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"not a {FORMAT} document")
    if doc.get("version") != VERSION:
        raise CheckpointError(f"version {doc.get('version')!r}, this controller reads version {VERSION}")
    body = doc.get("body")
    if not isinstance(body, dict) or hashlib.sha256(_canonical(body)).hexdigest() != doc.get("sha256"):
        raise CheckpointError("damaged: its digest does not match")
    if set(body) != {"input", "table", "settings", "engine", "decoder", "coups"}:
        raise CheckpointError("body: fields differ from the schema")
    saved = body["settings"]
    if not isinstance(saved, dict) or set(saved) != {"in_force", "digest"}:
        raise CheckpointError("settings: fields differ from the schema")
    if settings_of is not None:
        if saved["in_force"] is None:
            raise CheckpointError("written without its settings")
        in_force = _settings(saved["in_force"], settings_of)
        if in_force.digest != saved["digest"]:
            raise CheckpointError("its settings compile to others than those saved")
        engine = new_engine(in_force)
    else:
        engine = new_engine()
        if engine.settings.digest != saved["digest"]:
            raise CheckpointError(
                f"written for other settings (digest {str(saved['digest'])[:12]}), the config is now"
                f" {engine.settings.summary()}"
            )
    if body["table"] != engine.table:
        table = str(body["table"])[:40]
        raise CheckpointError(f"written for table {table!r}, the config is now {engine.table}")
    try:
        r = _Reader(body["coups"], settings_of)
        state = _fields(body["engine"], set(ENGINE_FIELDS), "Engine")
        values = {k: r.value(state[k]) for k in ENGINE_FIELDS}
        decoder = r.value(body["decoder"])
    except CheckpointError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise CheckpointError(f"invalid: {exc}") from None
    _check(values, decoder, None if new_decoder is None else new_decoder())
    for k, v in values.items():
        setattr(engine, k, v)
    return _int(body["input"]), engine, decoder


def _check(values: dict[str, Any], decoder: Any, fresh: Any) -> None:
    """What the engine relies on about the types of its state."""
    if fresh is not None and type(decoder) is not type(fresh):
        raise CheckpointError(f"decoder {type(decoder).__name__} is not the configured protocol's")
    if type(decoder) is AutoDecoder and not isinstance(decoder._pending, list):
        raise CheckpointError("decoder: pending reads are not a list")
    if not isinstance(values["seq"], int):
        raise CheckpointError("engine: seq is not an integer")
    shoe = values["shoe"]
    if shoe is not None:
        if not isinstance(shoe, Shoe) or not isinstance(shoe.comp, ShoeComposition):
            raise CheckpointError("engine: shoe is not a shoe")
        if not isinstance(shoe.coups, dict) or not all(isinstance(c, Coup) for c in shoe.coups.values()):
            raise CheckpointError("engine: shoe coups are not coups")
        if shoe.current is not None and not isinstance(shoe.current, Coup):
            raise CheckpointError("engine: current coup is not a coup")
    if values["_commit"] is not None and not isinstance(values["_commit"], _Commit):
        raise CheckpointError("engine: shuffle commitment is not one")
    if values["_next_settings"] is not None and not isinstance(values["_next_settings"], EngineSettings):
        raise CheckpointError("engine: settings for the next shoe are not settings")
    announced = values["_announced"]
    if announced is not None and not (
        isinstance(announced, dict) and isinstance(announced.get("digest"), str)
    ):
        raise CheckpointError("engine: the settings last announced are not a summary of settings")
