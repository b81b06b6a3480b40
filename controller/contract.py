"""The published contract as JSON Schemas (package data under
``controller/schemas/``): one per event type, the supervisor command, and
the archive's mark (``archive.mark.json``, the payload of
``<prefix>/<table>/archive/mark``)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def event_schema(event_type: str) -> dict[str, Any]:
    """The JSON Schema of one event type (``coup.result`` ...); KeyError if unknown."""
    node = resources.files("controller").joinpath("schemas", f"{event_type}.json")
    if not node.is_file():
        raise KeyError(event_type)
    data: dict[str, Any] = json.loads(node.read_text("utf-8"))
    return data


#: schemas that are not events
NOT_EVENTS = frozenset({"command.json", "archive.mark.json"})


def event_types() -> list[str]:
    root = resources.files("controller").joinpath("schemas")
    return sorted(
        p.name[:-5] for p in root.iterdir() if p.name.endswith(".json") and p.name not in NOT_EVENTS
    )
