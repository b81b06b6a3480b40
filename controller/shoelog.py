"""``.shoelog`` capture files (docs/devices.md, Captures): what ``replay`` reads and
``record`` writes.

UTF-8 text, one record a line::

    # protocol=shoe-ascii/1 table=T01
    1763800000.125 < $SH,0,HELLO,FAKE-1,1.0,000001*..
    1763800001.500 < hex:a55a0310....

``<`` is bytes from the device, ``>`` bytes to it. A payload is the literal
text of one ASCII frame (its ``\\r\\n`` implied) or ``hex:`` and the exact
bytes of one read. ``#`` lines are comments or ``key=value`` metadata.
Pure parsing: the caller opens files.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from controller.config import did_you_mean
from controller.errors import UsageError
from controller.rules import RULE_KEYS
from controller.textsafe import visible

#: 9999-12-31T23:59:59Z: RFC 3339 has four-digit years.
MAX_T = 253_402_300_799.0
#: Longest capture line read, in bytes (a capture is ASCII but for
#: comments): a record of a 512 KiB read in hex (a serial read is at most
#: 4 KiB). A longer one is an error, never read whole into memory.
MAX_LINE = 1 << 20
#: How much of a capture is read at a time: a quarter of MAX_LINE, so that a
#: block of whole lines (a partial line carried over, then a chunk) is
#: almost always shorter than MAX_LINE and needs no line's length checked.
_CHUNK = 1 << 18
_META_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
#: What a ``# key=value`` line may set (docs/devices.md, Captures): the capture's
#: protocol, table, profile and decks, and any rule setting of a profile.
META_KEYS: tuple[str, ...] = ("protocol", "table", "profile", "decks", *RULE_KEYS)


#: A record's fields, as read: ``(t, direction, data, line)``.
RecordFields = tuple[float, str, bytes, int]


class ShoelogError(UsageError):
    """A capture line that cannot be read; the message gives file and line."""


def shown(path: str | Path) -> str:
    """A capture's name as every message shows it: a file name may hold any
    byte but ``/`` and NUL (an escape sequence, a line break, bytes that
    are not UTF-8), shown escaped (``textsafe.visible``) so that a message
    stays one line of UTF-8 text."""
    return visible(os.fspath(path))


@dataclass(frozen=True, slots=True)
class Record:
    t: float
    direction: str  # "<" from the device, ">" to it
    data: bytes
    line: int


def parse_meta(line: str, where: str = "<capture>") -> dict[str, str]:
    """``# protocol=shoe-ascii/1 table=T01`` -> {"protocol": ..., "table": ...};
    a comment without pairs gives {}. A key that is not one of
    :data:`META_KEYS` is a ``ShoelogError`` naming it (a misspelt
    ``# tabel=`` must not be ignored, as a misspelt config key is not)."""
    meta = dict(_META_RE.findall(line.lstrip("#")))
    for key in meta:
        if key not in META_KEYS:
            raise ShoelogError(f"{where}: unknown key {key!r}{did_you_mean(key, META_KEYS)}")
    return meta


def parse_lines(lines: Iterable[str], source: str = "<capture>") -> Iterator[Record | dict[str, str]]:
    """Records and metadata dicts, in file order."""
    for n, raw in enumerate(lines, 1):
        item = _parse_line(raw.rstrip("\r\n"), n, source)
        if item is None:
            continue
        yield item if isinstance(item, dict) else Record(*item)


def _parse_line(line: str, n: int, source: str) -> RecordFields | dict[str, str] | None:
    """One line (its line break stripped) as a record's fields ``(t,
    direction, data, line)`` or a metadata dict; None for a blank line or a
    comment without pairs. The one definition of what a line may hold."""
    if not line.strip():
        return None
    if line.startswith("#"):
        return parse_meta(line, f"{source}:{n}") or None
    try:
        ts, direction, payload = line.split(" ", 2)
    except ValueError:
        if line.count(" ") == 1 and line.split(" ")[1] in "<>":
            ts, direction, payload = *line.split(" "), ""
        else:
            raise ShoelogError(f"{source}:{n}: expected '<seconds> <direction> <payload>'") from None
    if direction not in ("<", ">"):
        raise ShoelogError(f"{source}:{n}: direction must be '<' or '>', not {direction!r}")
    try:
        t = float(ts)
    except ValueError:
        raise ShoelogError(f"{source}:{n}: bad timestamp {ts!r}") from None
    if not 0 <= t <= MAX_T:  # also refuses NaN and infinities
        raise ShoelogError(f"{source}:{n}: bad timestamp {ts!r} (Unix seconds, 0 to the year 9999)")
    if payload.startswith("hex:"):
        try:
            data = bytes.fromhex(payload[4:])
        except ValueError:
            raise ShoelogError(f"{source}:{n}: bad hex payload") from None
    else:
        try:
            data = payload.encode("ascii") + b"\r\n"
        except UnicodeEncodeError:
            raise ShoelogError(f"{source}:{n}: a literal frame must be ASCII; use hex:") from None
    return t, direction, data, n


def open_capture(path: str | Path) -> IO[bytes]:
    """Open a capture for reading; a path that is missing, a directory or
    unreadable is a ``UsageError`` that says which."""
    if os.path.isdir(path):
        raise UsageError(f"{shown(path)}: is a directory, not a capture file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"{shown(path)}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None


def _line_error(source: str, n: int, raw: bytes, complete: bool) -> ShoelogError | None:
    """What is wrong with line ``n`` (``raw``, its LF stripped; ``complete``
    if one followed it), or None: longer than :data:`MAX_LINE` with its LF,
    or not UTF-8 (a capture is UTF-8 text, docs/devices.md, Captures)."""
    if len(raw) + complete > MAX_LINE:
        return ShoelogError(f"{source}:{n}: line longer than {MAX_LINE} bytes")
    try:
        # with its LF, as a line read alone: a sequence cut short by the LF
        # is an "invalid continuation byte", not an "unexpected end of data"
        (raw + b"\n" if complete else raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        return ShoelogError(
            f"{source}:{n}: not UTF-8 text ({exc.reason} at column {exc.start + 1}); "
            "a capture is text: write raw bytes as hex:"
        )
    return None


def _text_blocks(fh: IO[bytes], source: str) -> Iterator[tuple[int, str]]:
    """The file's lines as text, many at a time: ``(number of the first
    line, the lines joined by LF)``, read :data:`_CHUNK` bytes at a time and
    decoded in one call, not a line at a time. A line longer than
    :data:`MAX_LINE` or not UTF-8 is a ``ShoelogError`` naming it, raised
    once the lines before it were yielded (as a line-by-line reader would);
    at most ``MAX_LINE + _CHUNK`` bytes are held."""
    n = 0  # lines yielded so far
    tail = b""  # the start of a line whose LF was not read yet
    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            if tail:
                err = _line_error(source, n + 1, tail, False)
                if err is not None:
                    raise err
                yield n + 1, tail.decode("utf-8")
            return
        buf = tail + chunk if tail else chunk
        cut = buf.rfind(b"\n")
        if cut < 0:
            tail = buf
        else:
            tail = buf[cut + 1 :]
            block = buf[:cut]
            try:
                # no line of a block shorter than MAX_LINE can be too long
                text = block.decode("utf-8") if cut < MAX_LINE else None
            except UnicodeDecodeError:
                text = None
            if text is not None:
                yield n + 1, text
                n += block.count(b"\n") + 1
            else:  # line by line, to name the first bad one
                lines = block.split(b"\n")
                for i, raw in enumerate(lines):
                    err = _line_error(source, n + i + 1, raw, True)
                    if err is not None:
                        if i:
                            yield n + 1, b"\n".join(lines[:i]).decode("utf-8")
                        raise err
                yield n + 1, block.decode("utf-8")
                n += len(lines)
        if len(tail) > MAX_LINE:
            raise ShoelogError(f"{source}:{n + 1}: line longer than {MAX_LINE} bytes")


def _parse_block(text: str, first: int, source: str, meta: bool, out: list[Any]) -> None:
    """Appends to ``out`` the records (and with ``meta`` the metadata) of
    ``text``, lines ``first``... joined by LF; a bad line raises with what
    precedes it in ``out``."""
    add = out.append
    fromhex = bytes.fromhex
    cr = "\r" in text
    n = first - 1
    for line in text.split("\n"):
        n += 1
        if not cr:
            # The common line, parsed as _parse_line would (same split,
            # float, bound and decoding); any other line, and any of these
            # that fails, takes _parse_line.
            try:
                ts, direction, payload = line.split(" ", 2)
                t = float(ts)
                if (direction == "<" or direction == ">") and 0 <= t <= MAX_T:
                    if payload[:4] == "hex:":
                        add((t, direction, fromhex(payload[4:]), n))
                    else:
                        add((t, direction, payload.encode("ascii") + b"\r\n", n))
                    continue
            except ValueError:
                pass
            item = _parse_line(line, n, source)
        else:
            item = _parse_line(line.rstrip("\r\n"), n, source)
        if item is not None and (meta or type(item) is not dict):
            add(item)


def read_batches(path: str | Path) -> Iterator[list[RecordFields]]:
    """Every record of a capture as a tuple ``(t, direction, data, line)``
    (``Record``'s fields), in lists of those read together (up to a few
    thousand), in file order: replay's loop, which needs no ``Record`` and
    no call per line. ``# key=value`` lines are checked, not returned. A
    bad line is raised after the list of the records before it."""
    source = shown(path)
    with open_capture(path) as fh:
        for first, text in _text_blocks(fh, source):
            out: list[RecordFields] = []
            try:
                _parse_block(text, first, source, False, out)
            except ShoelogError:
                if out:
                    yield out
                raise
            yield out


def _device_block(text: str, first: int, source: str, ts: list[float], datas: list[bytes]) -> int:
    """:func:`_parse_block` without metadata, for replay: appends the time
    and bytes of each ``<`` record of ``text`` (lines ``first``... joined by
    LF) to ``ts`` and ``datas``, and returns how many records (of either
    direction) it read; every line is checked as there (a ``>`` record's
    payload too), and a bad line raises with what precedes it appended."""
    tadd = ts.append
    dadd = datas.append
    fromhex = bytes.fromhex
    cr = "\r" in text
    records = 0
    n = first - 1
    for line in text.split("\n"):
        n += 1
        if not cr:
            # the common line, as in _parse_block
            try:
                t_s, direction, payload = line.split(" ", 2)
                t = float(t_s)
                if (direction == "<" or direction == ">") and 0 <= t <= MAX_T:
                    if payload[:4] == "hex:":
                        data = fromhex(payload[4:])
                    else:
                        data = payload.encode("ascii") + b"\r\n"
                    records += 1
                    if direction == "<":
                        tadd(t)
                        dadd(data)
                    continue
            except ValueError:
                pass
            item = _parse_line(line, n, source)
        else:
            item = _parse_line(line.rstrip("\r\n"), n, source)
        if type(item) is tuple:
            records += 1
            if item[1] == "<":
                tadd(item[0])
                dadd(item[2])
    return records


def read_device_columns(path: str | Path) -> Iterator[tuple[int, list[float], list[bytes]]]:
    """What replay's loop needs of a capture, a block at a time (up to a few
    thousand records, in file order): ``(records read, the times of the
    device's reads, their bytes)``, the reads being the ``<`` records. The
    same lines and checks as :func:`read_batches`, but no tuple per record
    (two flat lists of objects the garbage collector does not track, where
    each record's tuple counted towards its next run). A bad line is raised
    after the block of the records before it."""
    source = shown(path)
    with open_capture(path) as fh:
        for first, text in _text_blocks(fh, source):
            ts: list[float] = []
            datas: list[bytes] = []
            try:
                records = _device_block(text, first, source, ts, datas)
            except ShoelogError:
                # (rare) the block again, as read_batches reads it, for the
                # records before the bad line; then the error
                out: list[RecordFields] = []
                with contextlib.suppress(ShoelogError):
                    _parse_block(text, first, source, False, out)
                if out:
                    reads = [r for r in out if r[1] == "<"]
                    yield len(out), [r[0] for r in reads], [r[2] for r in reads]
                raise
            yield records, ts, datas


def read_header(path: str | Path) -> dict[str, str]:
    """The metadata of a capture (every ``# key=value`` line, later wins).
    Reads the whole file: a bad line anywhere is a ``ShoelogError`` here,
    before any record is replayed."""
    meta: dict[str, str] = {}
    with open_capture(path) as fh:
        for first, text in _text_blocks(fh, shown(path)):
            # only the "#" lines, found by search: the block is not split
            # into lines (the header's block is most of a small capture)
            start = 0 if text.startswith("#") else text.find("\n#") + 1
            if start == 0 and not text.startswith("#"):
                continue
            n, counted = first, 0
            while True:
                n += text.count("\n", counted, start)
                counted = start
                end = text.find("\n", start)
                line = text[start:end] if end >= 0 else text[start:]
                meta.update(parse_meta(line, f"{shown(path)}:{n}"))
                if end < 0:
                    break
                start = text.find("\n#", end) + 1
                if start == 0:
                    break
    return meta


def read_shoelog(path: str | Path) -> Iterator[Record | dict[str, str]]:
    """Every record and metadata dict of a capture, in file order; lazy: a
    bad line is a ``ShoelogError`` once the lines before it were yielded."""
    source = shown(path)
    with open_capture(path) as fh:
        for first, text in _text_blocks(fh, source):
            out: list[RecordFields | dict[str, str]] = []
            try:
                _parse_block(text, first, source, True, out)
            except ShoelogError:
                yield from (x if isinstance(x, dict) else Record(*x) for x in out)
                raise
            for x in out:
                yield x if isinstance(x, dict) else Record(*x)


def device_reads(path: str | Path) -> Iterator[tuple[float, bytes]]:
    """The capture's reads from the device (``<`` records), as ``(t, bytes)``
    chunks: what ``drivers.replay.ReplayDriver`` plays back. Lazy, like
    :func:`read_shoelog`: a bad line is a ``ShoelogError`` when reached."""
    for batch in read_batches(path):
        for t, direction, data, _ in batch:
            if direction == "<":
                yield t, data


class ShoelogWriter:
    """Writes chunk-exact ``hex:`` records, flushed per record so that a
    crash loses at most the read in progress."""

    def __init__(self, stream: IO[str], meta: dict[str, Any]) -> None:
        self.stream = stream
        if meta:
            stream.write("# " + " ".join(f"{k}={v}" for k, v in meta.items()) + "\n")
            stream.flush()

    def write(self, t: float, direction: str, data: bytes) -> None:
        if direction not in ("<", ">"):
            raise ValueError("direction must be '<' or '>'")
        self.stream.write(f"{t:.3f} {direction} hex:{data.hex()}\n")
        self.stream.flush()

    def comment(self, text: str) -> None:
        self.stream.write("# " + text.replace("\n", " ") + "\n")
        self.stream.flush()
