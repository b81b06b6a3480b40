"""JSON lines on standard output: one event per line, exactly as stored in
the journal, flushed after every batch. With ``text=True`` (``run`` on a
terminal) a line a person reads instead (``controller.outputs.text``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from controller.journal import Journal
from controller.outputs.text import Winners


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
        #: the winners of the results rendered, for the line of a correction
        #: (one that supersedes a result rendered before this output began
        #: is read back from the journal)
        self._winners = Winners(self._stored)

    def _stored(self, event_id: str) -> Mapping[str, Any] | None:
        """The journal's event ``event_id`` (its seq is the id's last
        part), or None if it is not there (pruned, or not an id of ours)."""
        seq = event_id.rpartition("/")[2]
        if not seq.isdigit():
            return None
        for p in self._journal.events_since(int(seq) - 1, batch=1):
            if p.event_id == event_id:
                found: Mapping[str, Any] = json.loads(p.json)
                return found
            return None
        return None

    def pump(self) -> int:
        """Write everything pending; returns how many events were written.
        A broken pipe propagates: the reader has gone and the caller decides."""
        written = 0
        while True:
            pending = self._journal.pending(self.name, self._batch)
            if not pending:
                return written
            if self._text:
                lines = (self._winners.render(json.loads(p.json)) for p in pending)
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
