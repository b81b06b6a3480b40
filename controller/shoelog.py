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

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from controller.errors import UsageError

#: 9999-12-31T23:59:59Z: RFC 3339 has four-digit years.
MAX_T = 253_402_300_799.0
#: Longest capture line read, in characters: a record of a 512 KiB read in
#: hex (a serial read is at most 4 KiB). A longer one is an error, never
#: read whole into memory.
MAX_LINE = 1 << 20
_META_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")


class ShoelogError(UsageError):
    """A capture line that cannot be read; the message gives file and line."""


@dataclass(frozen=True, slots=True)
class Record:
    t: float
    direction: str  # "<" from the device, ">" to it
    data: bytes
    line: int


def parse_meta(line: str) -> dict[str, str]:
    """``# protocol=shoe-ascii/1 table=T01`` -> {"protocol": ..., "table": ...};
    a comment without pairs gives {}."""
    return dict(_META_RE.findall(line.lstrip("#")))


def parse_lines(lines: Iterable[str], source: str = "<capture>") -> Iterator[Record | dict[str, str]]:
    """Records and metadata dicts, in file order."""
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if line.startswith("#"):
            meta = parse_meta(line)
            if meta:
                yield meta
            continue
        try:
            ts, direction, payload = line.split(" ", 2)
        except ValueError:
            if line.count(" ") == 1 and line.split(" ")[1] in "<>":
                ts, direction, payload = *line.split(" "), ""
            else:
                raise ShoelogError(f"{source}:{n}: expected '<t> <|> <payload>'") from None
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


def read_header(path: str | Path) -> dict[str, str]:
    """The metadata of a capture (every ``# key=value`` line, later wins)."""
    meta: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in _bounded_lines(fh, str(path)):
            if line.startswith("#"):
                meta.update(parse_meta(line))
    return meta


def _bounded_lines(fh: IO[str], source: str) -> Iterator[str]:
    n = 0
    while line := fh.readline(MAX_LINE + 1):
        n += 1
        if len(line) > MAX_LINE:
            raise ShoelogError(f"{source}:{n}: line longer than {MAX_LINE} characters")
        yield line


def read_shoelog(path: str | Path) -> Iterator[Record | dict[str, str]]:
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the generator
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    with fh:
        try:
            yield from parse_lines(_bounded_lines(fh, str(path)), str(path))
        except UnicodeDecodeError as exc:
            raise ShoelogError(f"{path}: not UTF-8 text ({exc.reason})") from exc


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
