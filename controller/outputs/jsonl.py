"""A JSON-lines event file, appended to and fsynced batch by batch;
``reopen()`` after logrotate moved it (the daemon calls it on SIGHUP).

A file that cannot be opened, reopened or written (its directory missing
or unwritable, the disk full) never raises: the output records the problem
in ``failure``, keeps its events pending in the journal and tries again
every ``retry_s`` seconds; the daemon reports the change (log, metric,
``security.alert`` ``OUTPUT_FAILED`` / ``OUTPUT_RESTORED``) and deals on.

No torn line is ever followed by another line. A batch whose write or
fsync fails part-way is cut off again (``ftruncate`` back to where the
batch began; on a full disk it frees space, so it works) and written
whole once the retry succeeds: no event is lost or written twice. If the
cut itself fails, nothing more is written to that file until it succeeds
(retried every ``retry_s``), so the torn bytes stay its last line, without
a newline: a reader takes only newline-ended lines. A file found at open
with an unfinished last line (a crash mid-write) has that tail cut off.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from controller.journal import Journal

log = logging.getLogger(__name__)

#: Seconds between attempts while the file cannot be opened or written.
RETRY_S = 5.0

#: Bytes read at a time when looking back for the last newline at open.
_TAIL_CHUNK = 65536


class JsonlOutput:
    """Appends the journal's outbox to ``path``; an event counts as
    delivered once the line is on disk (written whole and fsynced)."""

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
        self._fd: int | None = None
        #: bytes at the end of the open file from a batch that failed
        #: part-way and could not be cut off yet (0: none)
        self._torn = 0
        #: what is wrong while the output cannot deliver (None: it delivers)
        self.failure: str | None = None
        #: failed attempts (open, reopen, write, cut) since start
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
        # O_APPEND: every write goes to the end of the file as it is then,
        # also after logrotate's copytruncate emptied it under us. Read
        # access only to look at the last line.
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            self._cut_unfinished_tail(fd)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def _cut_unfinished_tail(self, fd: int) -> None:
        """A crash mid-write can leave an unfinished last line: cut it off
        (its event was not marked delivered, it is written again), so that
        it is never followed by a line."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return
        end = pos = st.st_size
        keep = 0
        while pos > 0:
            start = max(0, pos - _TAIL_CHUNK)
            chunk = os.pread(fd, pos - start, start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            pos = start
        if keep < end:
            os.ftruncate(fd, keep)
            log.warning(
                "jsonl %s: cut off an unfinished last line of %d bytes (a write was interrupted)",
                self.path,
                end - keep,
            )

    def _cut_torn(self) -> bool:
        """Undo the bytes of a batch that failed part-way; False (and the
        output failing) while that cannot be done."""
        assert self._fd is not None
        try:
            size = os.fstat(self._fd).st_size
            # Counted back from the end: with O_APPEND the batch's bytes are
            # the last ones even if the file was truncated before the write.
            os.ftruncate(self._fd, max(0, size - self._torn))
        except OSError as exc:
            self._failed(f"cannot cut off a torn write of {self._torn} bytes", exc)
            return False
        self._torn = 0
        return True

    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.EIO, "write wrote nothing")
            self._torn += n
            view = view[n:]

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self._torn = 0

    def reopen(self) -> None:
        """Close and reopen the file (it may have been renamed by logrotate);
        if it cannot be reopened the output fails and retries."""
        with self._lock:
            if self._torn:
                # Best effort: if it fails, the old file keeps the torn bytes
                # as its last line, without a newline.
                self._cut_torn()
            self._close()
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
                if self._torn and not self._cut_torn():
                    return 0
                if self._fd is None and not self._try_open("cannot open"):
                    return 0
            while True:
                pending = self._journal.pending(self.name, self._batch)
                if not pending:
                    break
                if self._fd is None and not self._try_open("cannot open"):
                    return written
                assert self._fd is not None
                self._torn = 0
                try:
                    self._write_all(self._fd, "".join(p.json + "\n" for p in pending).encode("utf-8"))
                    os.fsync(self._fd)
                except OSError as exc:
                    self._failed("write failed", exc)
                    # Nothing of the batch may stay: not a torn line, nor
                    # whole lines that would be written again.
                    if self._torn and not self._cut_torn():
                        return written  # the descriptor is kept to cut them later
                    # The retry reopens (the file may be gone or replaced).
                    self._close()
                    return written
                self._torn = 0
                self._journal.mark_delivered(self.name, pending[-1].seq)
                written += len(pending)
            if self.failure is not None and self._fd is not None:
                log.warning("jsonl %s: delivering again (was: %s)", self.path, self.failure)
                self.failure = None
            return written

    def close(self) -> None:
        with self._lock:
            self._close()
