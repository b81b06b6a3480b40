"""The driver protocol: what every transport (serial, usb, fake, replay)
offers the daemon, and the link events a driver reports.

A driver moves bytes and nothing else: it opens its device, hands out
timestamped chunks exactly as it read them, writes host commands, and
reports when the connection drops or comes back. It never interprets a
card (ARCHITECTURE: data flows one way, drivers sit before the codecs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

Chunk = tuple[float, bytes]
"""One read: the Unix time taken right after the read, and the exact bytes."""


@dataclass(frozen=True, slots=True)
class LinkEvent:
    """The device connection went down (``up=False``) or came back
    (``up=True``) at Unix time ``t``; ``detail`` says why, for the log."""

    t: float
    up: bool
    detail: str = ""


class LinkDownError(ConnectionError):
    """A write was attempted while the device is disconnected; the bytes were
    not sent. The driver keeps trying to reconnect on its own."""


@runtime_checkable
class Driver(Protocol):
    """A transport to one device.

    ``read(timeout)`` blocks at most ``timeout`` seconds in the operating
    system (select, a serial timeout, a sleep: never a spin) and returns
    either a chunk ``(t, data)``, a :class:`LinkEvent` reporting a change of
    the link's state, or ``None`` when nothing happened in time. After
    ``open()`` the link is assumed up; a driver reports each change from
    there (a device absent at ``open()`` shows as ``LinkEvent(up=False)`` on
    the first read, not as an exception), and keeps reconnecting by itself.
    """

    def open(self) -> None:
        """Open the device (or start trying to)."""
        ...

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        """The next chunk or link change, or ``None`` after ``timeout`` s."""
        ...

    def write(self, data: bytes) -> None:
        """Send host bytes to the device; :class:`LinkDownError` while down."""
        ...

    def close(self) -> None:
        """Release the device; idempotent."""
        ...
