"""``.shoelog`` capture files (SPEC section 2): what ``replay`` reads and
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

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from controller.config import did_you_mean
from controller.errors import UsageError
from controller.rules import RULE_KEYS

#: 9999-12-31T23:59:59Z: RFC 3339 has four-digit years.
MAX_T = 253_402_300_799.0
#: Longest capture line read, in bytes (a capture is ASCII but for
#: comments): a record of a 512 KiB read in hex (a serial read is at most
#: 4 KiB). A longer one is an error, never read whole into memory.
MAX_LINE = 1 << 20
_META_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
#: What a ``# key=value`` line may set (SPEC section 2): the capture's
#: protocol, table, profile and decks, and any rule setting of a profile.
META_KEYS: tuple[str, ...] = ("protocol", "table", "profile", "decks", *RULE_KEYS)


class ShoelogError(UsageError):
    """A capture line that cannot be read; the message gives file and line."""


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
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if line.startswith("#"):
            meta = parse_meta(line, f"{source}:{n}")
            if meta:
                yield meta
            continue
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
        yield Record(t, direction, data, n)


def open_capture(path: str | Path) -> IO[bytes]:
    """Open a capture for reading; a path that is missing, a directory or
    unreadable is a ``UsageError`` that says which."""
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a capture file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _text_lines(fh: IO[bytes], source: str) -> Iterator[str]:
    """The file's lines as text; bytes that are not UTF-8 are a
    ``ShoelogError`` naming the line (a capture is UTF-8 text, SPEC section 2)."""
    n = 0
    while raw := fh.readline(MAX_LINE + 1):
        n += 1
        if len(raw) > MAX_LINE:
            raise ShoelogError(f"{source}:{n}: line longer than {MAX_LINE} bytes")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ShoelogError(
                f"{source}:{n}: not UTF-8 text ({exc.reason} at column {exc.start + 1}); "
                "a capture is text: write raw bytes as hex:"
            ) from None


def read_header(path: str | Path) -> dict[str, str]:
    """The metadata of a capture (every ``# key=value`` line, later wins)."""
    meta: dict[str, str] = {}
    with open_capture(path) as fh:
        for n, line in enumerate(_text_lines(fh, str(path)), 1):
            if line.startswith("#"):
                meta.update(parse_meta(line, f"{path}:{n}"))
    return meta


def read_shoelog(path: str | Path) -> Iterator[Record | dict[str, str]]:
    fh = open_capture(path)
    with fh:
        yield from parse_lines(_text_lines(fh, str(path)), str(path))


def device_reads(path: str | Path) -> Iterator[tuple[float, bytes]]:
    """The capture's reads from the device (``<`` records), as ``(t, bytes)``
    chunks: what ``drivers.replay.ReplayDriver`` plays back. Lazy, like
    :func:`read_shoelog`: a bad line is a ``ShoelogError`` when reached."""
    for rec in read_shoelog(path):
        if isinstance(rec, Record) and rec.direction == "<":
            yield rec.t, rec.data


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
