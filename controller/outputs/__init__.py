"""Where events go once they are in the journal: stdout, a JSON-lines file,
MQTT. Every output reads the journal's outbox after its own delivery mark,
so a slow or absent consumer never blocks dealing, and what was not
delivered before a crash goes out after it (at least once: consumers
de-duplicate on ``event_id``).

Each output has a ``name`` (its mark in the journal), ``pump() -> int``
(deliver what can be delivered now, return how many) and ``close()``.
"""

from __future__ import annotations

from typing import Protocol


class Output(Protocol):
    name: str

    def pump(self) -> int: ...

    def close(self) -> None: ...
