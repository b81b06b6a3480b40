"""The payload of ``<prefix>/<table>/archive/mark``, as a typed
definition: the floor archiver publishes it, retained, at QoS 1, saying how
far it holds the table's events without a hole (controller/archive/marks.py
writes it); the table reads it (controller/outputs/mqtt.py, ``parse_mark``,
which checks the same bounds and more: the id's table and seq). The
shipped JSON Schema, ``controller/schemas/archive.mark.json``, is
generated from it (controller/contract_gen.py).

Kept apart from both sides so that the contract generator needs neither
psycopg (the archiver's) nor paho (the table's)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

MAX_MARK_SEQ = 2**63 - 1


class ArchiveMark(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The archive holds every event of table from first_seq to seq; event_id is the one at seq."""

    v: Literal[1]
    table: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
    first_seq: Annotated[int, msgspec.Meta(ge=1, le=MAX_MARK_SEQ)]
    seq: Annotated[int, msgspec.Meta(ge=1, le=MAX_MARK_SEQ)]
    event_id: Annotated[str, msgspec.Meta(min_length=5, max_length=256)]
