"""A JSON-lines event file, appended to and fsynced batch by batch;
``reopen()`` after logrotate moved it (the daemon calls it on SIGHUP).

A file that cannot be opened, reopened or written (its directory missing
or unwritable, the disk full) never raises: the output records the problem
in ``failure``, keeps its events pending in the journal and tries again
every ``retry_s`` seconds; the daemon reports the change (log, metric,
``security.alert`` ``OUTPUT_FAILED`` / ``OUTPUT_RESTORED``) and deals on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from controller.journal import Journal

log = logging.getLogger(__name__)

#: Seconds between attempts while the file cannot be opened or written.
RETRY_S = 5.0


class JsonlOutput:
    """Appends the journal's outbox to ``path``; an event counts as
    delivered once the line is on disk (flushed and fsynced)."""

    def __init__(
        self,
        journal: Journal,
        path: str | os.PathLike[str],
        *,
        name: str = "jsonl",
        batch: int = 500,
        retry_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.path = Path(path)
        self._journal = journal
        self._batch = batch
        self._retry_s = RETRY_S if retry_s is None else retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        #: what is wrong while the output cannot deliver (None: it delivers)
        self.failure: str | None = None
        #: failed attempts (open, reopen, write) since start
        self.errors = 0
        self._retry_at = 0.0
        with self._lock:
            self._try_open("cannot open")

    def _failed(self, action: str, exc: OSError) -> None:
        why = f"{self.path}: {action}: {exc.strerror or exc}"
        if why != self.failure:
            log.error("jsonl %s; events wait in the journal, retrying every %g s", why, self._retry_s)
        self.failure = why
        self.errors += 1
        self._retry_at = self._clock() + self._retry_s

    def _try_open(self, action: str) -> bool:
        try:
            self._open()
        except OSError as exc:
            self._failed(action, exc)
            return False
        return True

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
        """Close and reopen the file (it may have been renamed by logrotate);
        if it cannot be reopened the output fails and retries."""
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None
            self._try_open("cannot reopen")

    def pump(self) -> int:
        """Append everything pending; returns how many events were written.
        While the output fails (``failure``) it tries again only every
        ``retry_s`` seconds; nothing raises."""
        written = 0
        with self._lock:
            if self.failure is not None:
                if self._clock() < self._retry_at:
                    return 0
                if self._file is None and not self._try_open("cannot open"):
                    return 0
            while True:
                pending = self._journal.pending(self.name, self._batch)
                if not pending:
                    break
                if self._file is None and not self._try_open("cannot open"):
                    return written
                assert self._file is not None
                try:
                    self._file.write("".join(p.json + "\n" for p in pending).encode("utf-8"))
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except OSError as exc:
                    self._failed("write failed", exc)
                    # Drop the handle (its buffer may not flush either): the
                    # retry reopens and starts on a fresh line.
                    with contextlib.suppress(OSError):
                        self._file.close()
                    self._file = None
                    return written
                self._journal.mark_delivered(self.name, pending[-1].seq)
                written += len(pending)
            if self.failure is not None and self._file is not None:
                log.warning("jsonl %s: delivering again (was: %s)", self.path, self.failure)
                self.failure = None
            return written

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None
