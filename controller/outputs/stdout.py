"""JSON lines on standard output: one event per line, exactly as stored in
the journal, flushed after every batch. With ``text=True`` (``run`` on a
terminal) a line a person reads instead (``controller.outputs.text``)."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from controller.journal import Journal
from controller.outputs.text import render


class StdoutOutput:
    """Writes the journal's outbox to a text stream (standard output by
    default); an event counts as delivered once the stream is flushed."""

    def __init__(
        self,
        journal: Journal,
        *,
        stream: TextIO | None = None,
        name: str = "stdout",
        batch: int = 500,
        text: bool = False,
    ) -> None:
        self.name = name
        #: standard output cannot fail and be retried: a broken pipe ends the
        #: run (see ``pump``), so these stay None and 0
        self.failure: str | None = None
        self.errors = 0
        self._journal = journal
        self._stream = stream if stream is not None else sys.stdout
        self._batch = batch
        self._text = text

    def pump(self) -> int:
        """Write everything pending; returns how many events were written.
        A broken pipe propagates: the reader has gone and the caller decides."""
        written = 0
        while True:
            pending = self._journal.pending(self.name, self._batch)
            if not pending:
                return written
            if self._text:
                lines = (render(json.loads(p.json)) for p in pending)
                self._stream.write("".join(line + "\n" for line in lines if line is not None))
            else:
                self._stream.write("".join(p.json + "\n" for p in pending))
            self._stream.flush()
            self._journal.mark_delivered(self.name, pending[-1].seq)
            written += len(pending)

    def reopen(self) -> None:
        """Nothing to reopen: the stream is the caller's."""

    def close(self) -> None:
        self._stream.flush()
