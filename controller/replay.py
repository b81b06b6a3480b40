"""Replay: a ``.shoelog`` capture through a decoder and a fresh engine.

The same file with the same options always yields the same events, with the
same ids and timestamps (taken from the file): replay is how a recorded
table session, a regression capture or a crash journal is re-lived.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config import table_problem
from controller.engine import Engine
from controller.errors import UsageError
from controller.events import Event
from controller.rules import RULE_KEYS, coerce_rule_overrides, load_profile
from controller.shoelog import Record, read_batches, read_device_columns, read_header, shown
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Frame

DEFAULTS = {"protocol": "shoe-ascii/1", "table": "T01", "profile": "punto_banco", "decks": "8"}


@dataclass
class ReplayOptions:
    profile: str | None = None
    decks: int | None = None
    table: str | None = None
    protocol: str | None = None
    odds: bool = False
    roads: bool = False
    rules: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReplayStats:
    """What :func:`replay_events` read, decoded and dropped; complete once
    its generator has ended (or was closed)."""

    records: int = 0
    bytes: int = 0
    frames: int = 0
    dropped: collections.Counter[str] = field(default_factory=collections.Counter)


#: What each decoder counter counts, for the summary: (singular, plural).
#: ``garbage`` counts bytes; the other drops count frames; a repeated copy
#: (Angel Eye sends every message three times; any protocol's resend) is
#: not a loss and is listed apart; a sequence gap counts gaps, whatever
#: their size. A counter not listed here is shown as ``name=N``.
_DROP_UNITS: dict[str, tuple[str, str]] = {
    "garbage": ("byte of garbage", "bytes of garbage"),
    "truncated": ("truncated frame", "truncated frames"),
    "too_long": ("over-long frame", "over-long frames"),
    "malformed": ("malformed frame", "malformed frames"),
    "bad_checksum": ("frame with a bad checksum", "frames with a bad checksum"),
    "conflicting_duplicate": (
        "frame repeating the last one's sequence with other bytes",
        "frames repeating the last one's sequence with other bytes",
    ),
    "unknown_message": ("unknown message", "unknown messages"),
}
_NOT_DROPS = {"frames", "duplicate", "sequence_gap"}


def _count(n: int, units: tuple[str, str]) -> str:
    return f"{n} {units[0] if n == 1 else units[1]}"


def summary(path: str | Path, stats: ReplayStats) -> str:
    """The one-line summary ``replay`` prints on stderr for a file: what was
    read, what was decoded, and what was dropped, each with its unit."""
    parts = [
        f"{_count(stats.records, ('record', 'records'))} ({_count(stats.bytes, ('byte', 'bytes'))})",
        f"{_count(stats.frames, ('frame', 'frames'))} decoded",
    ]
    repeats = stats.dropped.get("duplicate", 0)
    if repeats:
        parts.append(
            f"{_count(repeats, ('repeated copy', 'repeated copies'))} skipped (the same frame sent again)"
        )
    gaps = stats.dropped.get("sequence_gap", 0)
    if gaps:
        parts.append(_count(gaps, ("sequence gap", "sequence gaps")))
    drops = [
        _count(n, _DROP_UNITS[k]) if k in _DROP_UNITS else f"{k}={n}"
        for k, n in sorted(stats.dropped.items())
        if k not in _NOT_DROPS and n
    ]
    parts.append(f"dropped: {', '.join(drops) if drops else 'nothing'}")
    return f"replay: {path}: " + "; ".join(parts)


def settings_for(path: str | Path, opts: ReplayOptions) -> dict[str, Any]:
    """The capture's own header, then defaults, overridden by options."""
    meta = read_header(path)
    where = shown(path)
    if opts.table is not None:
        table, source = opts.table, "--table"
    else:
        table, source = meta.get("table", DEFAULTS["table"]), f"{where}: '# table='"
    problem = table_problem(table)
    if problem is not None:
        raise UsageError(f"{source} {problem}")
    protocol = opts.protocol or meta.get("protocol") or DEFAULTS["protocol"]
    profile = opts.profile or meta.get("profile") or DEFAULTS["profile"]
    decks_text = str(opts.decks) if opts.decks is not None else meta.get("decks", DEFAULTS["decks"])
    try:
        decks = int(decks_text)
    except ValueError:
        raise UsageError(f"{where}: decks={decks_text!r} is not a number") from None
    if not 1 <= decks <= 12:
        raise UsageError(f"{where}: decks must be 1..12, not {decks}")
    rules: dict[str, Any] = {}
    for key in RULE_KEYS:
        if key in meta:
            value: Any = meta[key]
            if key in ("cut_card_min", "demo_coups"):
                value = _int(where, key, value)
            elif key == "correction_deadline_s":
                value = _float(where, key, value)
            rules[key] = value
    rules.update(opts.rules)
    coerce_rule_overrides(rules, where)
    return {"table": table, "protocol": protocol, "profile": profile, "decks": decks, "rules": rules}


def _int(path: str | Path, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{path}: {key}={value!r} is not an integer") from None


def _float(path: str | Path, key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"{path}: {key}={value!r} is not a number") from None


def replay_events(
    path: str | Path,
    opts: ReplayOptions | None = None,
    *,
    stats: ReplayStats | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> Iterator[Event]:
    """Every event the engine emits for the capture, in order."""
    opts = opts or ReplayOptions()
    st = settings_for(path, opts)
    profile = load_profile(st["profile"], st["rules"])
    try:
        decoder = make_decoder(st["protocol"])
    except ValueError as exc:
        raise UsageError(f"{shown(path)}: {exc}") from None
    # analytics deferred and drained after each frame, as the daemon does:
    # the same events in the same order as live
    analytics = opts.odds or opts.roads
    engine = Engine(
        st["table"], profile, st["decks"], odds=opts.odds, roads=opts.roads, defer_analytics=analytics
    )
    drain = engine.drain_analytics
    stats = stats if stats is not None else ReplayStats()
    feed = engine.feed
    decode = decoder.feed
    # counted in locals, written to ``stats`` when the capture ends (or the
    # generator is closed): an attribute update per record costs more than
    # the record's read
    records = nbytes = nframes = 0
    try:
        if on_record is None:
            # The block's reads decoded, then their frames through the
            # engine: the same frames in the same order (a decoder does not
            # depend on the engine), and measurably faster than read by
            # read (30 shoes on the 2-core build box: 0.28 s, not 0.33 s;
            # the decoder's and the engine's code and data take turns in the
            # CPU's caches less often, presumably). A block is 256 KiB of
            # the file (read_device_columns), a few thousand records at most;
            # a decoder with ``feed_many`` (shoe-ascii/1) decodes it in one
            # call.
            many: Callable[[list[float], list[bytes]], list[Frame]] | None = getattr(
                decoder, "feed_many", None
            )
            for nrecords, ts, datas in read_device_columns(path):
                records += nrecords
                nbytes += sum(map(len, datas))
                if many is not None:
                    frames = many(ts, datas)
                else:
                    frames = []
                    for t, data in zip(ts, datas, strict=True):
                        frames += decode(t, data)
                nframes += len(frames)
                for frame in frames:
                    yield from feed(frame)
                    if analytics:
                        yield from drain()
        else:
            for batch in read_batches(path):
                # called before each record's events
                for item in batch:
                    t, direction, data, _ = item
                    on_record(Record(*item))
                    records += 1
                    if direction != "<":
                        continue  # host -> device bytes: the device's answer tells
                    nbytes += len(data)
                    frames = decode(t, data)
                    nframes += len(frames)
                    for frame in frames:
                        yield from feed(frame)
                        if analytics:
                            yield from drain()
    finally:
        stats.records += records
        stats.bytes += nbytes
        stats.frames += nframes
    stats.dropped.update({k: v for k, v in decoder.stats.items() if k != "frames" and v})


# ------------------------------------------------------------ replays apart

#: The first segment of every replayed event's id.
REPLAY_ID_HEAD = "replay"
#: The longest ``replay.source`` (a capture's file name, as given).
MAX_SOURCE_CHARS = 255


def new_run() -> str:
    """A replay run's id: 32 lowercase hex digits (a random UUID's)."""
    import uuid

    return uuid.uuid4().hex


def replay_event_id(run: str, table: str, shoe: str | None, seq: int) -> str:
    """``replay/<run>/<table>/<shoe or ->/<seq>``: never a live table's id.

    Why it cannot be one, whatever the run, table, shoe or seq: a live
    ``event_id`` is ``<table>/<shoe or ->/<seq>`` and none of its three parts
    can hold a ``/`` (a table is ``[A-Za-z0-9_-]{1,32}``, a shoe id is
    checked ``^[^/]+$``, a seq is digits), so it has exactly two slashes. A
    replay's id has exactly four (``run`` is hex, and the same three parts
    follow it). Two strings with a different count of ``/`` differ: a replay
    can never claim, duplicate or conflict with a live event's id, whatever
    table it is replayed as (``controller/archive/parse.py`` checks both
    forms against the event's own fields)."""
    return f"{REPLAY_ID_HEAD}/{run}/{table}/{shoe or '-'}/{seq}"


def replay_source(path: str | Path) -> str:
    """The ``replay.source`` of a capture: its file name (no directories),
    made visible text (``textsafe.visible``: a control character or a byte
    that is not UTF-8, a lone surrogate here, written as its escape, so the
    event stays valid UTF-8 JSON the archive takes), cut to
    ``MAX_SOURCE_CHARS``."""
    from controller.textsafe import visible

    name = Path(path).name or str(path)
    return visible(name)[:MAX_SOURCE_CHARS]


def mark_replayed(events: Iterator[Event], run: str, source: str) -> Iterator[Event]:
    """``events`` as a replay publishes them: the envelope says so
    (``"replay": {"run", "source"}`` after ``ts``) and each ``event_id``, and
    each ``supersedes`` naming one, takes the replay form
    (:func:`replay_event_id`). Nothing else changes: the payload, ``table``,
    ``shoe``, ``seq`` and ``ts`` are the capture's. The engine signs
    nothing, and a replay is journalled in a journal of its own with no
    table's key (``controller.replay_mqtt``): a replay carries no table's
    signature."""
    marker = {"run": run, "source": source}
    head = f"{REPLAY_ID_HEAD}/{run}/"
    for ev in events:
        out: Event = {}
        for key, value in ev.items():
            if key == "event_id" or (key == "supersedes" and isinstance(value, str)):
                value = head + value
            out[key] = value
            if key == "ts":
                out["replay"] = marker
        yield out
