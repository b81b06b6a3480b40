"""The yardstick for ``bench_replay``: a deliberately straightforward
replayer of a clean ``shoe-ascii/1`` punto banco capture, written here and
sharing no code with the project. It does the work that cannot be skipped:
parse the ``.shoelog``, verify every frame's XOR checksum and sequence
number, apply the punto banco third-card tableau (an extra card, a RESULT
before a due card, a bad checksum or a lost frame is a ``BaselineError``:
it handles no faults, so it needs no recovery), and ``json.dumps`` one
document per card and one per coup. Nothing else: no Article X, no
journal, no odds. ``tests/test_bench_baseline.py`` checks that its coups are
the project's."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

VALUES = {r: min(i + 1, 10) % 10 for i, r in enumerate("A23456789TJQK")}  # T J Q K -> 0
BURN = {r: min(i + 1, 10) for i, r in enumerate("A23456789TJQK")}  # T J Q K burn 10


class BaselineError(ValueError):
    pass


def banker_draws(b: int, p3: int | None) -> bool:
    if p3 is None:  # the player stood
        return b <= 5
    return (
        b <= 2
        or (b == 3 and p3 != 8)
        or (b == 4 and 2 <= p3 <= 7)
        or (b == 5 and 4 <= p3 <= 7)
        or (b == 6 and p3 in (6, 7))
    )


def frames(path: str) -> Iterator[tuple[float, list[str]]]:
    """(time, fields) of every device frame, checksum and sequence checked."""
    buf, last = b"", None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            ts, direction, payload = line.rstrip("\n").split(" ", 2)
            if direction != "<":
                continue
            data = bytes.fromhex(payload[4:]) if payload.startswith("hex:") else payload.encode() + b"\r\n"
            *lines, buf = (buf + data).split(b"\r\n")
            for raw in lines:
                body, ck = raw[1:-3], raw[-2:]
                if raw[:1] != b"$" or raw[-3:-2] != b"*" or int(ck, 16) != _xor(body):
                    raise BaselineError(f"bad frame {raw!r}")
                fields = body.decode("ascii").split(",")
                seq = int(fields[1])
                if last is not None and fields[2] != "HELLO" and seq != (last + 1) % 65536:
                    raise BaselineError(f"lost frame(s) before seq {seq}")
                last = seq
                yield float(ts), fields[2:]


def _xor(body: bytes) -> int:
    ck = 0
    for byte in body:
        ck ^= byte
    return ck


def replay(path: str, write: Callable[[str], Any], table: str = "T01") -> list[dict[str, Any]]:
    """Writes a JSON document per card and per coup; returns the coups."""
    coups: list[dict[str, Any]] = []
    shoe, burn, coup, n = None, 0, 0, 0
    hands: dict[str, list[str]] = {"P": [], "B": []}

    def emit(kind: str, t: float, body: dict[str, Any]) -> None:
        nonlocal n
        n += 1
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{round(t * 1000) % 1000:03d}Z"
        envelope = {"v": 1, "type": kind, "event_id": f"{table}/{shoe}/{n}", "table": table, "shoe": shoe}
        write(json.dumps({**envelope, "seq": n, "ts": ts, **body}) + "\n")

    for t, (kind, *args) in frames(path):
        if kind == "BTN" and args[0] == "NEWSHOE":
            shoe, burn, coup = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t)), -1, 0
            hands = {"P": [], "B": []}
        elif kind == "CARD":
            card, position = args[0], "burn"
            if burn == -1:
                burn = BURN[card[0]] + 1  # the exposed first card and the burn
            if burn > 0:
                burn -= 1
            else:
                position = next_position(hands)
                hands[position[0]].append(card)
                coup += position == "P1"
            face_up = args[1:2] == ["F"]
            number = coup if position != "burn" else None
            emit("card", t, {"coup": number, "position": position, "card": card, "value": VALUES[card[0]],
                             "face_up": face_up})  # fmt: skip
        elif kind == "BTN" and args[0] == "RESULT":
            if next_position(hands, result=True) != "done":
                raise BaselineError(f"RESULT before the tableau is complete in coup {coup}")
            p, b = (sum(VALUES[c[0]] for c in hands[h]) % 10 for h in "PB")
            doc = {"coup": coup, "player": {"cards": hands["P"], "total": p},
                   "banker": {"cards": hands["B"], "total": b},
                   "winner": "player" if p > b else "banker" if b > p else "tie",
                   "natural": len(hands["P"]) == len(hands["B"]) == 2 and max(p, b) >= 8,
                   "player_pair": hands["P"][0][0] == hands["P"][1][0],
                   "banker_pair": hands["B"][0][0] == hands["B"][1][0]}  # fmt: skip
            emit("coup.result", t, doc)
            coups.append({"shoe": shoe, **doc})
            hands = {"P": [], "B": []}
    return coups


def next_position(hands: dict[str, list[str]], result: bool = False) -> str:
    """The position the next card takes by the tableau, or ``done``."""
    n = len(hands["P"]) + len(hands["B"])
    if n < 4:
        return "PBPB"[n] + "1122"[n]
    p, b = (sum(VALUES[c[0]] for c in hands[h][:2]) % 10 for h in "PB")
    p3 = VALUES[hands["P"][2][0]] if len(hands["P"]) == 3 else None
    if p >= 8 or b >= 8:
        position = "done"
    elif p <= 5 and p3 is None:
        position = "P3"
    elif len(hands["B"]) == 2 and banker_draws(b, p3):
        position = "B3"
    else:
        position = "done"
    if position == "done" and not result:
        raise BaselineError(f"a card after the tableau is complete: {hands}")
    return position
