"""Where events go once they are in the journal: stdout, a JSON-lines file,
MQTT. Every output reads the journal's outbox after its own delivery mark,
so a slow or absent consumer never blocks dealing, and what was not
delivered before a crash goes out after it (at least once: consumers
de-duplicate on ``event_id``).

Each output is an :class:`Output`: the daemon drives every one the same way
through it. MQTT (``controller.outputs.mqtt``) is not one: it delivers on a
thread of its own and the daemon drives it through its own methods.
"""

from __future__ import annotations

from typing import Protocol


class Output(Protocol):
    """What the daemon asks of an output it pumps."""

    #: its delivery mark in the journal
    name: str
    #: what is wrong while it cannot deliver (None: it delivers); it retries
    #: on its own while its events wait in the journal
    failure: str | None
    #: failed attempts (open, write) since start
    errors: int

    def pump(self) -> int:
        """Deliver what can be delivered now; returns how many events."""
        ...

    def reopen(self) -> None:
        """Reopen what it writes to (SIGHUP, after logrotate)."""
        ...

    def close(self) -> None: ...
