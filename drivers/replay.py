"""A ``.shoelog`` capture as a device: the daemon reads it like a port.

Chunks keep the capture's own timestamps, so a replayed session is dealt
exactly as it was recorded; with ``realtime`` they come out at the pace
they were captured. ``eof`` turns true once the last record was read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from controller.shoelog import Record, read_shoelog
from drivers.base import Chunk, LinkEvent


class ReplayDriver:
    def __init__(self, path: str | Path, *, realtime: bool = False) -> None:
        self.path = Path(path)
        self.realtime = realtime
        self.eof = False
        self._records: Iterator[Record | dict[str, str]] | None = None
        self._t0: float | None = None
        self._wall0 = 0.0

    def open(self) -> None:
        self._records = read_shoelog(self.path)

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        if self._records is None or self.eof:
            time.sleep(min(timeout, 0.05))
            return None
        for rec in self._records:
            if not isinstance(rec, Record) or rec.direction != "<":
                continue
            if self.realtime:
                if self._t0 is None:
                    self._t0, self._wall0 = rec.t, time.monotonic()
                delay = (rec.t - self._t0) - (time.monotonic() - self._wall0)
                if delay > 0:
                    time.sleep(delay)
            return rec.t, rec.data
        self.eof = True
        return None

    def write(self, data: bytes) -> None:
        """A capture cannot be answered: host bytes are dropped."""

    def close(self) -> None:
        self._records = None
