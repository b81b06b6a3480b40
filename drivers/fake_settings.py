"""The fake shoe's settings as data: its fault kinds, the parser of a
fault spec, and the bound on its pace.

Pure (no pseudo-terminal, no thread, no clock), so a config can be checked
with it without loading the fake shoe itself: ``controller.config``
validates ``device.faults`` and ``device.cards_per_second`` here, and
``drivers.fake`` deals by what it accepts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: The fake shoe's fault kinds (docs/devices.md, The fake shoe), in the order they are documented.
FAULT_KINDS: tuple[str, ...] = (
    "garbage",
    "badck",
    "gap",
    "unread",
    "extra",
    "premature",
    "wronghand",
    "faceup",
    "jam",
    "disconnect",
    "foreign",
)
#: The fastest pace the fake deals at (0 = as fast as the reader reads):
#: synthetic time is kept in whole microseconds, and a pace past this is
#: no shoe's; a real dealer deals about one card a second.
MAX_CARDS_PER_SECOND = 10_000.0


def parse_faults(spec: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"gap:0.01,garbage:0.05"`` -> ``{"gap": 0.01, "garbage": 0.05}``.

    Raises ``ValueError`` naming the entry for an unknown kind, a missing or
    non-numeric probability, or a probability outside [0, 1].
    """
    if spec is None:
        return {}
    items: list[tuple[str, Any]]
    if isinstance(spec, str):
        items = []
        for raw in spec.split(","):
            entry = raw.strip()
            if not entry:
                continue
            kind, sep, prob = entry.partition(":")
            if not sep:
                raise ValueError(f"fault {entry!r}: expected kind:probability, e.g. 'gap:0.01'")
            items.append((kind.strip(), prob.strip()))
    else:
        items = list(spec.items())
    out: dict[str, float] = {}
    for kind, prob in items:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})")
        try:
            p = float(prob)
        except (TypeError, ValueError):
            raise ValueError(f"fault {kind!r}: probability {prob!r} is not a number") from None
        if not 0.0 <= p <= 1.0:  # also rejects NaN
            raise ValueError(f"fault {kind!r}: probability {p} is outside [0, 1]")
        out[kind] = p
    return out


def check_cards_per_second(value: float) -> float:
    """``value`` if it is a pace the fake can deal at, else ValueError."""
    if not (math.isfinite(value) and 0 <= value <= MAX_CARDS_PER_SECOND):
        raise ValueError(
            f"cards per second must be 0 (as fast as possible) to {MAX_CARDS_PER_SECOND:g}, not {value!r}"
        )
    return value
