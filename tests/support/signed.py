"""Events as the engine made them, before the journal signed them (issue
29): the daemon's outputs carry ``key_id``, ``prev``, ``sig`` (and
``chain_head``, ``chain_reset``), which a comparison with ``replay``'s
unsigned events leaves out."""

from __future__ import annotations

import json

from controller.events import dumps
from controller.signing import SIGNING_FIELDS


def unsigned_line(line: str) -> str:
    ev = json.loads(line)
    for f in SIGNING_FIELDS:
        ev.pop(f, None)
    return dumps(ev)


def unsigned(text: str) -> str:
    """JSON lines with the signing fields taken out of each event."""
    return "".join(unsigned_line(line) + "\n" for line in text.splitlines() if line.strip())
