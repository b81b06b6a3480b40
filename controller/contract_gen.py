"""Generates the JSON Schemas shipped in ``controller/schemas/`` from the
typed definitions (``controller.event_types`` for the events,
``controller.commands_schema`` for the supervisor command), so that the
published contract has no hand-written duplicate.

    python -m controller.contract_gen          # rewrite controller/schemas/*.json
    python -m controller.contract_gen --check  # exit 1 if a file differs

Each schema is self-contained (nested objects inlined, no ``$ref``), Draft
2020-12, and closed: every object has ``additionalProperties: false``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec

from controller.commands_schema import Command
from controller.event_types import EVENT_TYPES, Envelope, Payload

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/X"}`` replaced by X itself."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref[len("#/$defs/") :]], defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _closed(defs: dict[str, Any]) -> dict[str, Any]:
    """Every named object closed (a TypedDict's schema leaves it open) and
    without msgspec's ``title`` (the class name, not part of the contract)."""
    out = {}
    for name, schema in defs.items():
        schema = {k: v for k, v in schema.items() if k != "title"}
        if schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
        out[name] = schema
    return out


def _fields(struct: type[msgspec.Struct]) -> list[tuple[str, Any, Any]]:
    out: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(struct):
        if f.required:
            out.append((f.name, f.type, msgspec.NODEFAULT))
        else:
            out.append((f.name, f.type, f.default))
    return out


def event_struct(payload: type[Payload]) -> type[msgspec.Struct]:
    """The whole event of one type as published: envelope, then payload."""
    envelope = [
        (name, Literal[payload.TYPE] if name == "type" else tp, default)
        for name, tp, default in _fields(Envelope)
    ]
    return msgspec.defstruct(
        payload.__name__,
        envelope + _fields(payload),
        kw_only=True,
        forbid_unknown_fields=True,
    )


def _described(node: Any) -> Any:
    """``node`` as every msgspec version writes it: each ``description`` (a
    class's or a field's docstring) as ``inspect.cleandoc`` gives it (msgspec
    0.22 kept a docstring's indentation, 0.23 does not) and each ``enum`` of
    strings sorted (0.22 kept the definition's order, 0.23 sorts): the
    contract is the same text whichever version generates it."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                out[k] = inspect.cleandoc(v)
            elif k == "enum" and isinstance(v, list) and all(isinstance(x, str) for x in v):
                out[k] = sorted(v)
            else:
                out[k] = _described(v)
        return out
    if isinstance(node, list):
        return [_described(v) for v in node]
    return node


def _document(struct: Any, extra: dict[str, Any]) -> dict[str, Any]:
    (ref,), defs = msgspec.json.schema_components([struct])
    body = _described(_inline(ref, _closed(defs)))
    return {"$schema": SCHEMA_DIALECT, **extra, **body}


def event_schema(event_type: str) -> dict[str, Any]:
    return _document(
        event_struct(EVENT_TYPES[event_type]),
        {
            "$id": f"https://shoe-controller.invalid/schemas/{event_type}.json",
            "title": f"shoe-controller event {event_type} (v1)",
        },
    )


def command_schema() -> dict[str, Any]:
    """The JSON Schema of a supervisor command (``schemas/command.json``),
    generated from the Structs of ``controller.commands_schema``."""
    refs, defs = msgspec.json.schema_components([Command])
    body = _described(_inline(refs[0], _closed(defs)))
    # OpenAPI's keyword, pointing at the $defs that inlining removed: the
    # const ``cmd`` of each branch already tells them apart
    body.pop("discriminator", None)
    return {"$schema": SCHEMA_DIALECT, "title": "supervisor command (baccarat/<table>/cmd)", **body}


def archive_mark_schema() -> dict[str, Any]:
    """The payload of ``<prefix>/<table>/archive/mark``."""
    from controller.mark_schema import ArchiveMark

    return _document(
        ArchiveMark,
        {
            "$id": "https://shoe-controller.invalid/schemas/archive.mark.json",
            "title": "shoe-controller archive mark (v1): <prefix>/<table>/archive/mark, retained",
        },
    )


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def generated() -> dict[str, str]:
    """File name (under ``controller/schemas/``) -> its text."""
    files = {f"{t}.json": render(event_schema(t)) for t in sorted(EVENT_TYPES)}
    files["command.json"] = render(command_schema())
    files["archive.mark.json"] = render(archive_mark_schema())
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller.contract_gen", description=__doc__)
    ap.add_argument("--check", action="store_true", help="report files that differ; write nothing")
    args = ap.parse_args(argv)
    stale = []
    for name, text in generated().items():
        path = SCHEMA_DIR / name
        if path.exists() and path.read_text("utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, "utf-8")
    if args.check and stale:
        print(f"stale schemas (run python -m controller.contract_gen): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
