"""Fuzz target: ``.shoelog`` text through the capture reader, and what it
reads through a decoder and an engine, as ``shoe-controller replay`` does.

Invariants:

- ``parse_lines`` raises nothing but ``ShoelogError`` / ``UsageError``
  (the CLI turns those into a message and exit status 2); what it yields
  is metadata (str -> str) or a Record whose time is a finite number >= 0,
  direction ``<`` or ``>`` and data bytes;
- replayed (the header's protocol, table and profile when they are valid,
  the device's ``<`` records only), the decoder and the engine raise
  nothing, and every event keeps the contract (``fuzz.invariants``).
"""

from __future__ import annotations

import math
import sys

from fuzz import _harness

with _harness.instrumented():
    from controller.errors import UsageError
    from controller.rules import BUILTIN_PROFILES
    from controller.shoelog import Record, ShoelogError, parse_lines
    from firmware_protocols.detect import PROTOCOLS, make_decoder
    from fuzz import corpus
    from fuzz.invariants import EngineChecker, make_engine

TOKENS = [
    b"# protocol=shoe-bin/1 ",
    b"# protocol=angel-eye/2 ",
    b"# protocol=shoe-ascii/1 ",
    b"profile=ez_baccarat ",
    b"decks=1 ",
    b"table=T01\n",
    b"1763800000.125 < ",
    b" > ",
    b"hex:",
    b"hex:a55a",
    b"$SH,0,HELLO,A,B,C*",
    b"nan",
    b"inf",
    b"1e308",
    b"\n",
    b"\r\n",
]


class ShoelogInvariantError(AssertionError):
    pass


def read(text: str) -> tuple[dict[str, str], list[Record]] | None:
    """What the reader makes of ``text``; None when it refuses it."""
    meta: dict[str, str] = {}
    records: list[Record] = []
    try:
        for item in parse_lines(text.splitlines(keepends=True), "fuzz.shoelog"):
            if isinstance(item, Record):
                if not (math.isfinite(item.t) and item.t >= 0):
                    raise ShoelogInvariantError(f"record time {item.t!r}")
                if item.direction not in ("<", ">") or not isinstance(item.data, bytes):
                    raise ShoelogInvariantError(f"bad record {item!r}")
                records.append(item)
            else:
                if not all(isinstance(k, str) and isinstance(v, str) for k, v in item.items()):
                    raise ShoelogInvariantError(f"metadata {item!r}")
                meta.update(item)
    except (ShoelogError, UsageError):
        return None
    return meta, records


def replay(meta: dict[str, str], records: list[Record]) -> None:
    protocol = meta.get("protocol", "shoe-ascii/1")
    if protocol not in PROTOCOLS:
        return  # replay refuses it with a usage error
    profile = meta.get("profile", "punto_banco")
    if profile not in BUILTIN_PROFILES:
        profile = "punto_banco"
    decks = meta.get("decks", "8")
    checker = EngineChecker(
        make_engine(profile, int(decks) if decks in {str(i) for i in range(1, 13)} else 8)
    )
    decoder = make_decoder(protocol)
    t = 0.0
    for rec in records:
        if rec.direction != "<":
            continue
        t = rec.t
        for frame in decoder.feed(rec.t, rec.data):
            checker.feed(frame)
    checker.finish(t + 100_000.0)


def test_one_input(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # read_shoelog reports a file that is not UTF-8 as a ShoelogError
    got = read(text)
    if got is not None:
        replay(*got)


if __name__ == "__main__":
    _harness.main(test_one_input, corpus.shoelog_seeds, TOKENS, sys.argv)
