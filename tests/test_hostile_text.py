"""Hostile text over every outside string input: one
property per input, all drawing on the two strategies below ("hostile
text", "hostile numbers").

Hostile text is any Unicode the JSON or YAML parsers can produce: lone
surrogates (``"\\ud800"`` is valid JSON and valid YAML, and no UTF-8 can
carry it; ``\\udce9`` is what surrogateescape makes of a non-UTF-8
argument), C0 and C1 control characters (ESC, CR, BEL, NUL, CSI ``\\x9b``),
line and paragraph separators, BOMs and non-characters. Hostile numbers
are NaN and the infinities, ``1e400`` (infinite once parsed), integers
past 64 bits and past Python's 4300-digit limit, and negative zero.

Each input goes through the real entry point the product reads it with,
and the promise checked is the same everywhere: either it is refused at
the door with the module's one documented error, whose message is one
line of UTF-8 without a raw control character; or it is carried through,
and every output it reaches (events through ``events.dumps``, the
journal, the board's view, the archive's canonical JSON, a terminal's
line) is UTF-8 and, where it is JSON, strict JSON. No process dies.

The inputs: supervisor commands (``commands_schema`` then a live engine
and a journal); device text (HELLO fields and a STAT text, through the
``shoe-ascii/1`` and ``shoe-bin/1`` decoders into an engine); capture
files (``.shoelog`` header, records, file name, replay); configs and
profiles (YAML values and keys, ``load_config``, ``load_profile``); CLI
arguments (``controller.cli.main`` in process, and the console script for
a few); MQTT payloads read by the board
(``TableState.apply``, then the page's JSON) and by the archive
(``archive.parse.parse``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from binascii import crc_hqx
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from controller import cli
from controller.archive.parse import Invalid, parse
from controller.board.app import Hub
from controller.board.config import parse_board_config
from controller.board.state import BadMessage, TableState
from controller.commands_schema import CommandError, command_json, parse_command, parse_journalled
from controller.config import load_config, parse_config
from controller.errors import ConfigError, UsageError
from controller.events import dumps
from controller.journal import Journal
from controller.outputs.text import render
from controller.replay import ReplayOptions, replay_events
from controller.rules import load_profile
from controller.shoelog import ShoelogError, read_batches, read_header, read_shoelog
from firmware_protocols import shoe_ascii, shoe_bin
from firmware_protocols.frames import Card, Hello, Status
from firmware_protocols.framing import xor8
from fuzz.fuzz_commands import SCENARIOS
from fuzz.invariants import make_engine

CAPTURES = Path(__file__).parent / "captures"
SCRIPT = Path(sys.executable).with_name("shoe-controller")
T0 = 1_763_800_000.0

# =========================================================================
# The shared strategies: hostile text and hostile numbers
# =========================================================================

#: The characters a hostile sender reaches for, drawn often: C0 controls
#: (NUL, BEL, BS, TAB, LF, VT, FF, CR, ESC), DEL, C1 (NEL, CSI), NBSP, the
#: line and paragraph separators, a right-to-left override, a BOM, two
#: non-characters and lone surrogates (both halves, and surrogateescape's).
NASTY_CHARS = (
    "\x00\x07\x08\t\n\x0b\x0c\r\x1b\x7f\x85\x9b\xa0\u2028\u2029\u202e\ufeff\ufffe\uffff"
    "\ud800\udbff\udc00\udc80\udce9\udfff"
)
#: Whole texts worth trying as they are.
NASTY_TEXTS = (
    "\ud800",
    "caf\udce9",
    "ok\x1b[2K\rforged line",
    "a\x00b",
    "one\ntwo",
    "one\u2028two",
    "\x9b31mred",
    "\u202egnp.exe",
    "",
    " ",
    "T01",
)

hostile_char = st.one_of(
    st.sampled_from(NASTY_CHARS),
    st.characters(codec=None, categories=None, exclude_categories=[]),  # any code point
)
#: Any text a JSON or YAML parser can hand over.
hostile_text = st.one_of(
    st.sampled_from(NASTY_TEXTS),
    st.text(hostile_char, min_size=1, max_size=12),
    st.tuples(
        st.sampled_from(["T01", "ok", "SH-1", "1.0"]), st.text(hostile_char, min_size=1, max_size=4)
    ).map("".join),
)

#: Numbers as a JSON text may spell them (Python's json takes NaN and
#: Infinity; 1e400 parses as inf; 5000 digits are past int's limit).
HOSTILE_NUMBER_TOKENS = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "18446744073709551616",
    "-9223372036854775809",
    "9223372036854775808",
    "1" + "0" * 40,
    "9" * 5000,
)
hostile_number = st.one_of(
    st.sampled_from(HOSTILE_NUMBER_TOKENS),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
#: The same in YAML (1.1, as PyYAML reads it): .nan, .inf, a float that
#: overflows, long ints in several bases, a sexagesimal.
HOSTILE_YAML_NUMBERS = (
    ".nan",
    ".NaN",
    ".inf",
    "-.inf",
    "1.0e+400",
    "-1.0e+400",
    "1.0e-400",
    "-0.0",
    "18446744073709551616",
    "9" * 5000,
    "0x" + "f" * 40,
    "0b" + "1" * 80,
    "190:20:30",
    "1_000_000",
)
hostile_yaml_number = st.one_of(
    st.sampled_from(HOSTILE_YAML_NUMBERS),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


@dataclass(frozen=True)
class Raw:
    """A JSON (or YAML) token written as is: a hostile number."""

    text: str


def to_json(obj: Any, ascii_only: bool) -> str:
    """JSON text of ``obj`` with any ``Raw`` written verbatim; strings
    escaped (``ascii_only``: every non-ASCII character as ``\\uXXXX``, lone
    surrogates included) or raw (a lone surrogate then cannot be UTF-8)."""
    if isinstance(obj, Raw):
        return obj.text
    if isinstance(obj, dict):
        return (
            "{"
            + ",".join(f"{to_json(str(k), ascii_only)}:{to_json(v, ascii_only)}" for k, v in obj.items())
            + "}"
        )
    if isinstance(obj, list):
        return "[" + ",".join(to_json(v, ascii_only) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=ascii_only)


def json_bytes(obj: Any, ascii_only: bool) -> bytes:
    """The bytes on the wire: a raw lone surrogate is encoded as its three
    bytes (not UTF-8), as a careless producer would send it."""
    return to_json(obj, ascii_only).encode("utf-8", "surrogatepass")


#: A hostile JSON value: text or a number token.
hostile_value = st.one_of(hostile_text, hostile_text, hostile_number.map(Raw))


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON tree a value can be replaced."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any, rename: bool) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == head:
                if rename and not rest:
                    out[value if isinstance(value, str) else "x"] = v
                else:
                    out[k] = _replace(v, rest, value, rename)
            else:
                out[k] = v
        return out
    out_list = list(obj)
    out_list[head] = _replace(obj[head], rest, value, rename)
    return out_list


@st.composite
def hostile_json(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """``base`` with one to three places made hostile (a value replaced, a
    key renamed, or a hostile key added), as JSON bytes."""
    obj: Any = base
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        paths = list(_paths(obj))
        how = draw(st.sampled_from(["value", "value", "value", "rename", "add"]))
        if how == "add" or not paths:
            obj = {**obj, draw(hostile_text): draw(hostile_value)}
            continue
        path = draw(st.sampled_from(paths))
        if how == "rename" and not isinstance(path[-1], int):
            obj = _replace(obj, path, draw(hostile_text), rename=True)
        else:
            obj = _replace(obj, path, draw(hostile_value), rename=False)
    return json_bytes(obj, draw(st.booleans()))


# =========================================================================
# What every case asserts
# =========================================================================

#: C0, DEL, C1, and the line/paragraph separators: what may forge or erase
#: a line on a terminal or in a log read line by line.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clean_line(text: str, what: str) -> None:
    """One line of UTF-8 text without a raw control character."""
    text.encode("utf-8")  # a lone surrogate raises
    bad = _CONTROL.search(text)
    assert bad is None, f"{what}: raw {bad.group()!r} in {text!r}"


def one_line_refusal(exc: BaseException) -> None:
    clean_line(str(exc), f"{type(exc).__name__} message")


def strict_json(text: str | bytes, what: str) -> Any:
    """UTF-8, and JSON a strict reader takes (no NaN or Infinity)."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8")

    def no_constant(name: str) -> Any:
        raise AssertionError(f"{what}: {name} is not JSON: {raw[:200]!r}")

    return json.loads(raw.decode("utf-8"), parse_constant=no_constant)


def check_events(events: list[dict[str, Any]], what: str) -> None:
    """Events as the daemon writes them (``events.dumps``: JSON lines, the
    journal, MQTT) and as a terminal shows them (``outputs.text.render``)."""
    for ev in events:
        strict_json(dumps(ev), f"{what}: {ev.get('type')}")
        line = render(ev)
        if line is not None:
            clean_line(line, f"{what}: the terminal's line for {ev.get('type')}")


def check_journal(events: list[dict[str, Any]], t: float, data: bytes) -> None:
    """The input and its events stored as the daemon's ``_commit`` does."""
    with tempfile.TemporaryDirectory() as d, Journal(Path(d) / "j.sqlite3") as journal:
        journal.append_input(t, "cmd", data, events, durable=False)
        stored = [strict_json(p.json, "journal") for p in journal.events_since(0)]
        assert len(stored) == len(events)


COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# =========================================================================
# Supervisor commands: the parser, the journal's record, a live engine
# =========================================================================

COMMANDS: list[dict[str, Any]] = [
    {"id": "s1", "cmd": "void", "coup": 1, "reason": "misdealt", "table": "T01", "ts": 1.0},
    {"id": "s2", "cmd": "enter_card", "coup": 1, "card": "TD"},
    {"id": 3, "cmd": "accept", "coup": 1, "ts": 1.0},
    {"id": "s4", "cmd": "new_shoe", "table": "T01"},
    {"id": "s5", "cmd": "end_shoe", "sig": "0" * 64},
]


def _one_text_field(base: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """``base`` with one of its text fields hostile (the likeliest to be
    taken, and so to reach the engine and the journal)."""
    fields = [k for k in base if k in ("id", "reason", "card", "table", "sig")]
    return st.builds(
        lambda k, text, ascii_only: json_bytes({**base, k: text}, ascii_only),
        st.sampled_from(fields),
        hostile_text,
        st.booleans(),
    )


hostile_command = st.sampled_from(COMMANDS).flatmap(
    lambda base: st.one_of(hostile_json(base), _one_text_field(base))
)


@settings(COMMON, max_examples=150)
@given(st.one_of(st.just(0), st.integers(0, len(SCENARIOS) - 1)), hostile_command)
@example(0, b'{"id":"s1","cmd":"void","coup":1,"reason":"\\ud800"}')
@example(0, b'{"id":"s1","cmd":"void","coup":1,"reason":"caf\\udce9"}')
@example(0, b'{"id":"ok\\u001b[2K\\rforged","cmd":"void","coup":1,"reason":"x"}')
@example(0, b'{"id":"s1","cmd":"void","coup":1,"reason":"\\u001b[2J\\u0007"}')
@example(0, b'{"id":"s1","cmd":"accept","coup":1,"ts":1e400}')
def test_a_hostile_command_is_refused_in_one_line_or_carried_through_as_utf8(
    scenario: int, payload: bytes
) -> None:
    try:
        cmd = parse_command(payload)
    except CommandError as exc:
        one_line_refusal(exc)
        return
    # accepted: what the journal stores reads back the same, and the engine
    # mid-shoe answers it with events every output can write
    record = command_json(cmd)
    record.decode("utf-8")
    assert parse_journalled(record) == cmd
    engine = make_engine("punto_banco", 8)
    script = SCENARIOS[scenario]
    for frame in script.frames:
        engine.feed(frame)
    try:
        reply, events = engine.command(cmd, script.t + 1.0)
    except CommandError as exc:
        one_line_refusal(exc)
        return
    strict_json(json.dumps(reply, separators=(",", ":")), "reply")
    check_events(events, "command")
    check_journal(events, script.t + 1.0, record)


# =========================================================================
# Device text: HELLO fields and a STAT text, as bytes on the wire
# =========================================================================

#: A device's field as bytes: hostile text in UTF-8 (a lone surrogate as
#: its three bytes), or any bytes at all.
device_field = st.one_of(
    hostile_text.map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.binary(max_size=16),
)


def ascii_frame(body: bytes) -> bytes:
    return b"$" + body + b"*" + b"%02X" % xor8(body) + b"\r\n"


def bin_frame(ftype: int, seq: int, payload: bytes) -> bytes:
    head = bytes([len(payload), ftype]) + seq.to_bytes(2, "little")
    return shoe_bin.MARKER + head + payload + crc_hqx(head + payload, 0xFFFF).to_bytes(2, "little")


def _device_frames_through_engine(frames: list[Any]) -> None:
    for f in frames:
        if isinstance(f, Hello):
            for text in (f.model, f.firmware, f.serial):
                clean_line(text, "a HELLO field")
        if isinstance(f, Status):
            clean_line(f.code, "a STAT code")
            clean_line(f.text or "", "a STAT text")
    engine = make_engine("punto_banco", 8)
    events: list[dict[str, Any]] = []
    for f in frames:
        events += engine.feed(f)
    check_events(events, "device")


@settings(COMMON, max_examples=120)
@given(device_field, device_field, device_field, device_field)
@example(b"SHOE\x1b[2J", b"1.0\r\nforged", b"\xed\xa0\x80", b"JAM\x07")
def test_device_text_is_refused_as_malformed_or_carried_through_as_utf8(
    model: bytes, firmware: bytes, serial: bytes, stat_text: bytes
) -> None:
    # shoe-ascii/1: the fields between commas, any bytes but the frame's own
    ascii_bytes = ascii_frame(b"SH,0,HELLO," + model + b"," + firmware + b"," + serial)
    ascii_bytes += ascii_frame(b"SH,1,STAT,JAM," + stat_text)
    ascii_bytes += ascii_frame(b"SH,2,CARD,TD")
    for feed in ("feed", "feed_many"):
        dec = shoe_ascii.Decoder()
        frames = dec.feed(T0, ascii_bytes) if feed == "feed" else dec.feed_many([T0], [ascii_bytes])
        assert any(isinstance(f, Card) for f in frames), frames  # the decoder read on
        _device_frames_through_engine(frames)
    # shoe-bin/1: NUL-separated ASCII, the payload at most 255 bytes
    payload = (model + b"\0" + firmware + b"\0" + serial)[:255]
    bin_bytes = bin_frame(shoe_bin.T_HELLO, 0, payload) + bin_frame(shoe_bin.T_CARD, 1, bytes([9, 0, 0]))
    frames = shoe_bin.Decoder().feed(T0, bin_bytes)
    assert any(isinstance(f, Card) for f in frames), frames
    _device_frames_through_engine(frames)


# =========================================================================
# Capture files: header, records, and a replay of them
# =========================================================================

CAPTURE_BODY = (CAPTURES / "x_unread_card.shoelog").read_text(encoding="utf-8")
META_KEYS = ("protocol", "table", "profile", "decks", "burn", "cut_card_min", "correction_deadline_s")

#: A capture line that is hostile: a header value, a key, a record's
#: fields, a literal payload.
capture_line = st.one_of(
    st.tuples(st.sampled_from(META_KEYS), hostile_text).map(lambda kv: f"# {kv[0]}={kv[1]}"),
    st.tuples(st.sampled_from(META_KEYS), hostile_number).map(lambda kv: f"# {kv[0]}={kv[1]}"),
    hostile_text.map(lambda s: f"# {s}=1"),
    st.tuples(hostile_number, st.sampled_from(["<", ">"])).map(lambda p: f"{p[0]} {p[1]} $SH,1,CUT*5A"),
    hostile_text.map(lambda s: f"{T0} < {s}"),
    hostile_text.map(lambda s: f"{T0} {s} hex:00"),
    hostile_text.map(lambda s: f"{T0} < hex:{s}"),
    # device text recorded as it came: a HELLO whose fields are any bytes
    st.tuples(device_field, device_field).map(
        lambda f: f"{T0} < hex:" + ascii_frame(b"SH,0,HELLO," + f[0] + b",1.0," + f[1]).hex()
    ),
    hostile_text,
)


def _capture_error(exc: BaseException) -> None:
    assert isinstance(exc, UsageError), f"{type(exc).__name__}: {exc}"
    one_line_refusal(exc)


#: A file's name as the file system gives it (any bytes but "/" and NUL,
#: decoded with surrogateescape): it is in every message about the file.
file_name = st.one_of(
    st.just("hostile"),
    st.binary(min_size=1, max_size=12).map(lambda b: os.fsdecode(b.replace(b"\0", b"x").replace(b"/", b"x"))),
    hostile_text.map(
        lambda s: os.fsdecode(s.encode("utf-8", "surrogatepass").replace(b"\0", b"x").replace(b"/", b"x"))
    ),
)


@settings(COMMON, max_examples=60)
@given(st.lists(capture_line, min_size=1, max_size=3), st.integers(0, 3), st.booleans(), file_name)
@example(["# table=T\x1b[2J01"], 0, True, "hostile")
@example(["# profile=\x1b]0;x\x07"], 0, True, "hostile")
@example([f"{T0} < caf\u00e9\x1b"], 3, True, "hostile")
@example(["# decks=x"], 0, True, "x\x1b[2J\rforged\udce9")
@example(["# tabel=T01"], 0, True, "x\x1b[2J\rforged\udce9")
def test_a_hostile_capture_is_refused_in_one_line_or_replayed_as_utf8(
    lines: list[str], where: int, header: bool, name: str
) -> None:
    body = CAPTURE_BODY.splitlines()
    at = 0 if header else min(where, len(body))
    text = "\n".join(body[:at] + lines + body[at:]) + "\n"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.shoelog"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        for read in (read_header, lambda p: list(read_shoelog(p)), lambda p: list(read_batches(p))):
            try:
                read(path)
            except ShoelogError as exc:
                one_line_refusal(exc)
        try:
            events = list(replay_events(path, ReplayOptions(roads=True)))
        except UsageError as exc:  # ShoelogError, ConfigError (the header's rules) are UsageErrors
            _capture_error(exc)
            return
        check_events(events, "replay")


# =========================================================================
# Configs: hostile YAML values and keys
# =========================================================================

CONFIG: dict[str, Any] = {
    "table": "T01",
    "profile": "punto_banco",
    "decks": 8,
    "device": {"driver": "fake", "cards_per_second": 2.0, "faults": "gap:0.01"},
    "journal": "./var/journal.sqlite3",
    "journal_retention_days": 90,
    "odds": True,
    "advantage_threshold": 0.0,
    "metrics": "127.0.0.1:10108",
    "outputs": {
        "stdout": True,
        "jsonl": "./var/events.jsonl",
        "mqtt": {"host": "localhost", "client_id": "c"},
    },
    "rules": {"burn": "first_card", "correction_deadline_s": 120},
}


@dataclass(frozen=True)
class YamlRaw:
    text: str


def _yaml(obj: Any, allow_unicode: bool) -> str:
    tokens: dict[str, str] = {}

    def swap(o: Any) -> Any:
        if isinstance(o, YamlRaw):
            key = f"RAW{len(tokens)}RAW"
            tokens[key] = o.text
            return key
        if isinstance(o, dict):
            return {swap(k): swap(v) for k, v in o.items()}
        if isinstance(o, list):
            return [swap(v) for v in o]
        return o

    text = yaml.safe_dump(swap(obj), allow_unicode=allow_unicode, width=10_000)
    for key, token in tokens.items():
        text = text.replace(key, token)
    return text


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        obj = obj[k]
    return obj


@st.composite
def hostile_yaml(draw: st.DrawFn, base: dict[str, Any]) -> str:
    """``base`` as YAML with one or two places made hostile: a value
    replaced by hostile text or a hostile number, a key renamed, or a
    hostile key added to a mapping."""
    obj: Any = base
    for _ in range(draw(st.integers(1, 2))):
        paths = list(_paths(obj))
        how = draw(st.sampled_from(["text", "number", "rename", "add"]))
        if how == "add":
            section = draw(st.sampled_from([(), *(p for p in paths if isinstance(_get(obj, p), dict))]))
            key = draw(hostile_text)
            value = draw(st.one_of(hostile_text, hostile_yaml_number.map(YamlRaw)))
            added = {**_get(obj, section), key: value}
            obj = _replace(obj, section, added, rename=False) if section else added
            continue
        path = draw(st.sampled_from(paths))
        if how == "rename":
            obj = _replace(obj, path, draw(hostile_text), rename=True)
        elif how == "number":
            obj = _replace(obj, path, YamlRaw(draw(hostile_yaml_number)), rename=False)
        else:
            obj = _replace(obj, path, draw(hostile_text), rename=False)
    return _yaml(obj, draw(st.booleans()))


def hostile_config() -> st.SearchStrategy[tuple[str, bool]]:
    """A hostile config, and whether it is read from a file (else text)."""
    return st.tuples(hostile_yaml(CONFIG), st.booleans())


def _config_refusal(exc: ConfigError, name: str) -> None:
    """A ConfigError's message: one line, or (several problems) a first
    line saying how many and one line per problem; every line clean."""
    msg = str(exc)
    lines = msg.split("\n")
    for line in lines:
        clean_line(line, "a ConfigError line")
    assert lines[0].startswith(name), msg
    if len(lines) > 1:
        m = re.fullmatch(r".*: (\d+) problems:", lines[0])
        assert m is not None and int(m.group(1)) == len(lines) - 1, msg
        assert all(line.startswith("  ") for line in lines[1:]), msg


def _walk_values(obj: Any) -> Iterator[Any]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk_values(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _walk_values(v)
    else:
        yield obj


@settings(COMMON, max_examples=120)
@given(hostile_config())
@example(('table: T01\ndevice: {driver: fake}\njournal: "\\ud800"\n', True))
@example(("table: T01\ndevice: {driver: fake}\nadvantage_threshold: .nan\n", True))
@example(('table: T01\ndevice: {driver: fake}\n"\\e[2Jx\\r\\nforged": 1\n', True))
@example(('table: T01\ndevice: {driver: fake, "\\e[2Jx": 1}\n', True))
def test_a_hostile_config_is_refused_naming_its_key_in_clean_lines_or_holds_only_text(
    case: tuple[str, bool],
) -> None:
    text, from_file = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            cfg = load_config(path) if from_file else parse_config(text, "config.yaml")
        except ConfigError as exc:
            _config_refusal(exc, str(path) if from_file else "config.yaml")
            return
    # accepted: every string is text UTF-8 can carry, every number finite
    for value in _walk_values(cfg.model_dump()):
        if isinstance(value, str):
            value.encode("utf-8")
        if isinstance(value, float):
            assert math.isfinite(value), cfg
    json.loads(cfg.model_dump_json())


PROFILE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent.parent / "controller" / "profiles" / "punto_banco.yaml").read_text(
        encoding="utf-8"
    )
)


@settings(COMMON, max_examples=80)
@given(hostile_yaml(PROFILE))
@example(_yaml({**PROFILE, "title": "\ud800"}, allow_unicode=False))
@example(_yaml({**PROFILE, "bets": {**PROFILE["bets"], "x\x1b[2J": [{"pays": 1}]}}, allow_unicode=False))
def test_a_hostile_profile_is_refused_in_clean_lines_or_holds_only_text(text: str) -> None:
    """A profile file (``profile:`` a path): the same promise as a config."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "profile.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            profile = load_profile(str(path))
        except ConfigError as exc:
            _config_refusal(exc, str(path))
            return
    for value in _walk_values(dataclasses.asdict(profile)):
        if isinstance(value, str):
            value.encode("utf-8")
        if isinstance(value, float):
            assert math.isfinite(value), profile


# =========================================================================
# CLI arguments: in process (the property) and the console script
# =========================================================================

#: A command line argument as argv gives it: bytes (no NUL) decoded with
#: the file system's encoding and surrogateescape.
argv_text = st.one_of(
    hostile_text.map(lambda s: os.fsdecode(s.encode("utf-8", "surrogatepass").replace(b"\0", b""))),
    st.binary(min_size=1, max_size=12).map(lambda b: os.fsdecode(b.replace(b"\0", b"x"))),
)
CAPTURE = str(CAPTURES / "x_unread_card.shoelog")
#: Commands whose text arguments go straight to the product (no broker, no
#: database needed to reach a verdict); ``{}`` is the hostile argument.
ARGV: list[tuple[str, ...]] = [
    ("check-config", "{}"),
    ("replay", "{}"),
    ("replay", "--table", "{}", CAPTURE),
    ("replay", "--profile", "{}", CAPTURE),
    ("replay", "--protocol", "{}", CAPTURE),
    ("roads", "{}"),
    ("roads", "--profile", "{}", CAPTURE),
    ("odds", "--remove", "{}"),
    ("odds", "--profile", "{}"),
    ("history", "shoes", "--journal", "{}"),
    ("history", "shoes", "-c", "{}"),
    ("history", "coup", "{}", "1", "--journal", "missing.sqlite3"),
    ("board", "--check", "-c", "{}"),
    ("archive", "-c", "{}", "--stats"),
    ("ctl", "void", "-c", "{}", "--coup", "2"),
    # a broker that is not there: a reason taken is sent, and fails in one line
    ("ctl", "void", "-c", "ctl.yaml", "--coup", "2", "--reason", "{}", "--timeout", "0.1"),
    ("ctl", "enter-card", "-c", "ctl.yaml", "--coup", "2", "--card", "{}", "--timeout", "0.1"),
]


def _run_main(argv: list[str]) -> tuple[int, str, str]:
    """``cli.main`` with stdout strict UTF-8 (as a pipe in a UTF-8 locale:
    printing a lone surrogate raises) and stderr backslash-escaping (as
    Python's own stderr)."""
    out_b, err_b = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_b, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_b, encoding="utf-8", errors="backslashreplace", write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return code, out_b.getvalue().decode("utf-8"), err_b.getvalue().decode("utf-8")


@settings(COMMON, max_examples=80)
@given(st.sampled_from(ARGV), argv_text)
@example(("replay", "{}"), "caf\udce9.shoelog")
@example(("check-config", "{}"), "x\x1b[2J\nforged")
@example(("replay", "--table", "{}", CAPTURE), "T\udce9")
def test_a_hostile_argument_is_one_line_on_stderr_or_a_clean_run(argv: tuple[str, ...], arg: str) -> None:
    if arg.startswith("-"):
        arg = "./" + arg  # an option, not an argument: argparse's business
    with tempfile.TemporaryDirectory() as d, contextlib.chdir(d):
        Path("ctl.yaml").write_text("table: T01\noutputs:\n  mqtt: {host: 127.0.0.1, port: 9}\n")
        code, _out, err = _run_main([arg if a == "{}" else a for a in argv])
    assert "Traceback" not in err, err
    if code == 0:
        assert err == "" or err.count("\n") == 1, err
        return
    # 2: a usage or config error; 1: a runtime one (a journal not there)
    assert code in (1, 2), (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    clean_line(lines[0], "stderr")


@pytest.mark.parametrize(
    "argv",
    [
        [b"replay", b"caf\xe9.shoelog"],
        [b"check-config", b"x\x1b[2J\rforged"],
        [b"replay", b"--table", b"T\xe9", CAPTURE.encode()],
        [b"roads", b"\xed\xa0\x80"],
    ],
    ids=["replay-latin1-path", "check-config-escape", "replay-table-latin1", "roads-surrogate-bytes"],
)
def test_the_console_script_refuses_a_hostile_argument_in_one_line(argv: list[bytes], tmp_path: Path) -> None:
    r = subprocess.run(
        [os.fsencode(SCRIPT), *argv], capture_output=True, timeout=60, cwd=tmp_path, check=False
    )
    err = r.stderr.decode("utf-8")  # not UTF-8: raises
    assert r.returncode == 2, (r.returncode, err)
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    clean_line(lines[0], "stderr")


def test_ctl_refuses_a_non_utf8_reason_in_one_line_before_sending(tmp_path: Path) -> None:
    """``ctl void --reason $'caf\\xe9'``: refused at the
    door (2), not sent (no broker listens on the config's port)."""
    cfg = tmp_path / "ctl.yaml"
    cfg.write_text("table: T01\noutputs:\n  mqtt: {host: 127.0.0.1, port: 9}\n")
    r = subprocess.run(
        [
            os.fsencode(SCRIPT),
            b"ctl",
            b"void",
            b"-c",
            os.fsencode(cfg),
            b"--coup",
            b"2",
            b"--reason",
            b"caf\xe9",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    err = r.stderr.decode("utf-8")
    assert r.returncode == 2, (r.returncode, err)
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    clean_line(lines[0], "stderr")


# =========================================================================
# MQTT payloads: the board and the archive
# =========================================================================


@lru_cache(maxsize=1)
def sample_events() -> list[dict[str, Any]]:
    """A few events of every type the engine writes, from real captures."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for name in (
        "profile_ez_baccarat",
        "x_device_fault_void",
        "x_premature_result_corrected",
        "x_unread_card",
    ):
        for ev in replay_events(CAPTURES / f"{name}.shoelog", ReplayOptions(odds=True, roads=True)):
            if seen.get(ev["type"], 0) < 3:
                seen[ev["type"]] = seen.get(ev["type"], 0) + 1
                out.append(ev)
    return out


def _topic(ev: dict[str, Any]) -> str:
    return f"baccarat/{ev['table']}/{ev['type'].replace('.', '/')}"


@st.composite
def hostile_message(draw: st.DrawFn) -> tuple[str, bytes]:
    ev = draw(st.sampled_from(sample_events()))
    return _topic(ev), draw(hostile_json(ev))


_BOARD = "tables:\n  - table: T01\nodds: true\nmqtt: {host: localhost}\n"


@settings(COMMON, max_examples=120)
@given(st.lists(hostile_message(), min_size=1, max_size=3))
@example(
    [
        (
            "baccarat/T01/device/status",
            b'{"type":"device.status","state":"online","device":{"model":"\\ud800"}}',
        )
    ]
)
@example([("baccarat/T01/coup/result", b'{"type":"coup.result","coup":1e400}')])
@example(
    [("baccarat/T01/device/status", b'{"type":"device.status","state":"online","seq":' + b"9" * 5000 + b"}")]
)
def test_the_board_refuses_a_hostile_message_in_one_line_or_serves_strict_json(
    messages: list[tuple[str, bytes]],
) -> None:
    hub = Hub(parse_board_config(_BOARD))
    state: TableState = hub.tables["T01"]
    for ev in sample_events()[:4]:  # a table in play
        with contextlib.suppress(BadMessage):
            state.apply(_topic(ev), dumps(ev).encode())
    for topic, payload in messages:
        try:
            state.apply(topic, payload)
        except BadMessage as exc:
            one_line_refusal(exc)
        strict_json(hub.view_json("T01"), "the board's view")


@settings(COMMON, max_examples=150)
@given(hostile_message())
@example(("baccarat/T01/shoe/started", b'{"v":1,"type":"shoe.started","table":"T01","shoe":"\\ud800"}'))
@example(("baccarat/T01/card", b'{"v":1,"type":"card","seq":1e400}'))
def test_the_archive_refuses_a_hostile_event_in_one_line_or_stores_utf8_json(
    message: tuple[str, bytes],
) -> None:
    topic, payload = message
    try:
        ev = parse(topic, payload, prefix="baccarat", max_bytes=65536)
    except Invalid as exc:
        one_line_refusal(exc)
        return
    strict_json(ev.canonical, "canonical JSON")
    for value in _walk_values([ev.body, ev.typed[1] if ev.typed else {}, ev.shoe, ev.event_id]):
        if isinstance(value, str):
            value.encode("utf-8")
        if isinstance(value, float):
            assert math.isfinite(value), value


def test_the_strategies_reach_every_kind_of_hostile_input() -> None:
    """The strategies are not tame: each kind of character and number is
    among what they draw (a property over tame text would prove nothing)."""
    found: set[str] = set()

    @settings(max_examples=400, database=None, deadline=None)
    @given(hostile_text, hostile_number)
    def draw(text: str, number: str) -> None:
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            found.add("surrogate")
        if re.search("[\x00-\x1f]", text):
            found.add("C0")
        if re.search("[\x80-\x9f]", text):
            found.add("C1")
        if number in ("NaN", "Infinity", "-Infinity", "1e400"):
            found.add("non-finite")
        if number.lstrip("-").isdigit() and len(number.lstrip("-")) >= 20:
            found.add("huge")

    draw()
    assert found == {"surrogate", "C0", "C1", "non-finite", "huge"}, found


# =========================================================================
# The bounds the properties rely on, at the bound
# =========================================================================

_BASE_CONFIG = "table: T01\ndevice: {driver: fake}\n"


def test_a_config_number_is_taken_up_to_the_largest_float_and_refused_past_it() -> None:
    cfg = parse_config(_BASE_CONFIG + "advantage_threshold: 1.7976931348623157e+308\n")
    assert cfg.advantage_threshold == sys.float_info.max
    for token, shown in ((".nan", "nan"), (".inf", "inf"), ("-.inf", "-inf"), ("1.8e+308", "inf")):
        with pytest.raises(ConfigError) as err:
            parse_config(_BASE_CONFIG + f"advantage_threshold: {token}\n")
        assert str(err.value) == f"<config>: advantage_threshold: must be a finite number, not {shown}"


def test_config_text_is_taken_up_to_the_surrogates_and_refused_within_them() -> None:
    for ok in ("\\ud7ff", "\\ue000", "\\U0010ffff"):
        assert parse_config(_BASE_CONFIG + f'journal: "j{ok}"\n').journal.startswith("j")
    for bad in ("\\ud800", "\\udfff", "\\udce9"):
        with pytest.raises(ConfigError) as err:
            parse_config(_BASE_CONFIG + f'journal: "j{bad}"\n')
        assert str(err.value) == "<config>: journal: holds a lone surrogate (not UTF-8 text)"
    with pytest.raises(ConfigError) as err:
        parse_config(_BASE_CONFIG + '"\\e[2J\\rx": 1\n')
    assert str(err.value).startswith("<config>: \\x1b[2J\\rx: unknown key (allowed: ")


def test_a_capture_name_is_shown_escaped_in_its_messages(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"x\x1b[2J\rforged\xe9.shoelog")
    path.write_text("# tabel=T01\n", encoding="utf-8")
    with pytest.raises(ShoelogError) as err:
        read_header(path)
    assert str(err.value).startswith(f"{tmp_path}/x\\x1b[2J\\rforged\\udce9.shoelog:1: unknown key 'tabel'")
    with pytest.raises(UsageError) as missing:
        list(read_shoelog(tmp_path / "a\nb.shoelog"))
    assert str(missing.value) == f"{tmp_path}/a\\nb.shoelog: no such file"


def test_a_config_of_nested_aliases_is_checked_once_per_node() -> None:
    """A "billion laughs" config (9 levels of 10 aliases: 10**9 strings as a
    tree, about a hundred nodes as YAML) is checked for hostile values in
    the time of its nodes, not of its tree."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    lines.append('late: "\\ud800"')

    def too_slow(signum: int, frame: Any) -> None:
        raise TimeoutError("the config check walks the aliases' tree")

    old = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(10)
    t0 = time.monotonic()
    try:
        with pytest.raises(ConfigError) as err:
            parse_config("\n".join(lines) + "\n")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < 2.0
    assert str(err.value) == "<config>: late: holds a lone surrogate (not UTF-8 text)"
