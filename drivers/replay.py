"""A capture's device reads as a device: the daemon reads it like a port.

The driver knows no file format: it is given ``reads``, a callable that
opens the capture and returns its device reads ``(t, bytes)`` in order (the
daemon passes ``controller.shoelog.device_reads``, which parses the
``.shoelog`` format). Chunks keep the capture's own timestamps, so a
replayed session is dealt exactly as it was recorded; with ``realtime``
they come out at the pace they were captured. ``eof`` turns true once the
last read was returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from drivers.base import Chunk, LinkEvent


class ReplayDriver:
    def __init__(self, reads: Callable[[], Iterable[Chunk]], *, realtime: bool = False) -> None:
        self._open_reads = reads
        self.realtime = realtime
        self.eof = False
        self._reads: Iterator[Chunk] | None = None
        self._t0: float | None = None
        self._wall0 = 0.0

    def open(self) -> None:
        self._reads = iter(self._open_reads())

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        if self._reads is None or self.eof:
            time.sleep(min(timeout, 0.05))
            return None
        for t, data in self._reads:
            if self.realtime:
                if self._t0 is None:
                    self._t0, self._wall0 = t, time.monotonic()
                delay = (t - self._t0) - (time.monotonic() - self._wall0)
                if delay > 0:
                    time.sleep(delay)
            return t, data
        self.eof = True
        return None

    def write(self, data: bytes) -> None:
        """A capture cannot be answered: host bytes are dropped."""

    def close(self) -> None:
        self._reads = None
