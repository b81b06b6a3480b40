"""A JSON-lines event file, appended to and fsynced batch by batch;
``reopen()`` after logrotate moved it (the daemon calls it on SIGHUP)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import BinaryIO

from controller.journal import Journal

log = logging.getLogger(__name__)


class JsonlOutput:
    """Appends the journal's outbox to ``path``; an event counts as
    delivered once the line is on disk (flushed and fsynced)."""

    def __init__(
        self, journal: Journal, path: str | os.PathLike[str], *, name: str = "jsonl", batch: int = 500
    ) -> None:
        self.name = name
        self.path = Path(path)
        self._journal = journal
        self._batch = batch
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        self._open()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "ab")  # noqa: SIM115 - kept open across pumps
        # A crash can leave half a line at the end: start on a fresh line so
        # the next event is never glued to it.
        if f.tell() > 0:
            with open(self.path, "rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    f.write(b"\n")
        self._file = f

    def reopen(self) -> None:
        """Close and reopen the file (it may have been renamed by logrotate)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._open()

    def pump(self) -> int:
        """Append everything pending; returns how many events were written.
        A write error (disk full) is logged and retried at the next pump."""
        written = 0
        with self._lock:
            while True:
                pending = self._journal.pending(self.name, self._batch)
                if not pending:
                    return written
                if self._file is None:
                    self._open()
                assert self._file is not None
                try:
                    self._file.write("".join(p.json + "\n" for p in pending).encode("utf-8"))
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except OSError as exc:
                    log.error("jsonl %s: write failed, will retry: %s", self.path, exc)
                    # Drop the handle (its buffer may not flush either): the
                    # retry reopens and starts on a fresh line.
                    with contextlib.suppress(OSError):
                        self._file.close()
                    self._file = None
                    return written
                self._journal.mark_delivered(self.name, pending[-1].seq)
                written += len(pending)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
