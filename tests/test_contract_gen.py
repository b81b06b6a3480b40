"""The shipped JSON Schemas are generated from the typed definitions
(``controller.event_types``, ``controller.commands_schema``): regenerating
gives exactly the committed files, and the command schema agrees with the
command parser on what it accepts."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from controller import contract_gen
from controller.commands_schema import (
    Accept,
    AcceptAsTaken,
    CommandError,
    command_dict,
    command_from_dict,
    parse_command,
    parse_journalled,
)
from controller.contract import event_schema, event_types


def test_regenerating_gives_exactly_the_committed_schemas() -> None:
    files = contract_gen.generated()
    assert set(files) == {f"{t}.json" for t in event_types()} | {"command.json", "archive.mark.json"}
    for name, text in files.items():
        assert (contract_gen.SCHEMA_DIR / name).read_text("utf-8") == text, f"{name} is stale"
    assert contract_gen.main(["--check"]) == 0


def test_check_reports_a_stale_schema(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, text in contract_gen.generated().items():
        (tmp_path / name).write_text(text, "utf-8")
    (tmp_path / "card.json").write_text("{}\n", "utf-8")
    monkeypatch.setattr(contract_gen, "SCHEMA_DIR", tmp_path)
    assert contract_gen.main(["--check"]) == 1
    assert (tmp_path / "card.json").read_text("utf-8") == "{}\n"  # --check writes nothing
    assert contract_gen.main([]) == 0
    assert contract_gen.main(["--check"]) == 0


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [o for v in node for o in _objects(v)]
    if not isinstance(node, dict):
        return []
    own = [node] if node.get("type") == "object" and "properties" in node else []
    return own + [o for v in node.values() for o in _objects(v)]


@pytest.mark.parametrize("name", [*event_types(), "command", "archive.mark"])
def test_every_schema_is_self_contained_and_closed(name: str) -> None:
    schema = json.loads((contract_gen.SCHEMA_DIR / f"{name}.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "$ref" not in json.dumps(schema)
    objects = _objects(schema)
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"]


def test_every_event_schema_requires_the_envelope_first() -> None:
    for t in event_types():
        schema = event_schema(t)
        assert schema["required"][:7] == ["v", "type", "event_id", "table", "shoe", "seq", "ts"]
        assert schema["properties"]["type"] == {"enum": [t]}


COMMAND_SCHEMA = json.loads((contract_gen.SCHEMA_DIR / "command.json").read_text("utf-8"))


@pytest.mark.parametrize(
    "cmd",
    [
        {"id": "a", "cmd": "void", "coup": 12, "reason": "dealer error", "ts": 1.5, "table": "T01"},
        {"id": 7, "cmd": "enter_card", "coup": 3, "card": "TD"},
        {"id": "x", "cmd": "accept", "coup": 1000, "sig": "a" * 64},
        {"id": "x", "cmd": "new_shoe"},
        {"id": -(2**63), "cmd": "end_shoe", "ts": 0},
    ],
)
def test_a_parsed_command_is_valid_by_the_schema(cmd: dict[str, Any]) -> None:
    parsed = parse_command(json.dumps(cmd).encode())
    assert command_dict(parsed) == cmd
    jsonschema.validate(cmd, COMMAND_SCHEMA)


@pytest.mark.parametrize(
    "cmd",
    [
        {"id": "a", "cmd": "void", "coup": 1},  # missing reason
        {"id": "a", "cmd": "accept", "coup": 1001},
        {"id": "a", "cmd": "new_shoe", "coup": 1},  # a field new_shoe does not take
        {"id": "", "cmd": "new_shoe"},
        {"id": 2**63, "cmd": "new_shoe"},
        {"id": "a", "cmd": "teleport"},
        {"id": "a", "cmd": "_alert", "code": "X", "detail": "y"},  # the daemon's own: not on the wire
        {"id": "a", "cmd": "new_shoe", "ts": 1e11},
        {"id": "a", "cmd": "void", "coup": 1, "reason": "r" * 501},
    ],
)
def test_what_the_parser_refuses_the_schema_refuses(cmd: dict[str, Any]) -> None:
    with pytest.raises(CommandError):
        parse_command(json.dumps(cmd).encode())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(cmd, COMMAND_SCHEMA)


def test_journalled_commands_parse_through_the_same_parser() -> None:
    # (journalled with no confirm: before entries were confirmed, re-fed as taken then)
    assert parse_journalled(b'{"id":"a","cmd":"accept","coup":3}') == AcceptAsTaken(id="a", coup=3)
    assert parse_journalled(b'{"id":"a","cmd":"accept","coup":3,"confirm":null}') == Accept(id="a", coup=3)
    with pytest.raises(CommandError, match="'coup' must be an integer from 1 to 1000"):
        parse_journalled(b'{"id":"a","cmd":"accept","coup":20000}')
    for own in (
        {"id": "c9", "cmd": "_reject", "error": "stale command"},
        {"id": None, "cmd": "_alert", "code": "JOURNAL_LOST", "detail": "d", "seq_above": 40},
        {"id": None, "cmd": "_alert", "code": "OUTPUT_FAILED", "detail": "d"},
        {"cmd": "_refused", "refused": 2, "dropped": 0, "window_s": 60.0, "limits": "l"},
    ):
        parsed = parse_journalled(json.dumps(own).encode())
        assert command_dict(parsed) == own
        assert command_from_dict(own) == parsed
    for bad, message in [
        ({"cmd": "_refused", "refused": -1, "dropped": 0, "window_s": 60.0, "limits": "l"}, "count"),
        ({"id": None, "cmd": "_alert", "code": "X", "detail": "d", "extra": 1}, "unknown field 'extra'"),
        ({"id": "a", "cmd": "_alert", "code": "X", "detail": "d"}, "'id' must be null"),
        ({"cmd": "_reboot"}, "unknown command '_reboot'"),
        ({"id": None, "cmd": "_alert", "code": "X", "detail": "d" * 8193}, "at most 8192"),
    ]:
        with pytest.raises(CommandError, match=message):
            parse_journalled(json.dumps(bad).encode())
    with pytest.raises(CommandError, match="larger than 65536 bytes"):
        parse_journalled(b" " * 65537)


def test_a_rebuild_refeeds_journalled_commands_through_the_parser(tmp_path: Any) -> None:
    """The journal's command rows (a supervisor's and the daemon's own, as
    older versions wrote them) are read back by ``parse_journalled``; a row
    the parser refuses changes nothing and is answered, never a traceback."""
    from controller.config import load_config
    from controller.daemon import Daemon
    from controller.journal import Journal
    from tests.support.configs import write_config

    cfg = load_config(
        write_config(tmp_path, {"driver": "serial", "port": "/dev/null", "protocol": "shoe-ascii/1"})
    )
    rows = [
        {"id": None, "cmd": "_alert", "code": "OUTPUT_FAILED", "detail": "jsonl: disk full"},
        {"cmd": "_refused", "refused": 3, "dropped": 1, "window_s": 10.0, "limits": "l"},
        {"id": "c7", "cmd": "_reject", "error": "stale command"},
        {"id": "c8", "cmd": "new_shoe", "ts": 1.5},
        {"id": "c9", "cmd": "accept", "coup": 1, "extra": True},  # refused: unknown field
    ]
    with Journal(cfg.journal) as journal:
        for i, row in enumerate(rows):
            journal.append_input(100.0 + i, "cmd", json.dumps(row, separators=(",", ":")).encode())
        daemon = Daemon(cfg)
        daemon._rebuild(journal)
        events = [json.loads(p.json) for p in journal.events_since(0)]
    assert daemon.last_reply == {"id": "c9", "ok": False, "error": "accept: unknown field 'extra'"}
    alerts = [(e["code"], e["detail"]) for e in events if e["type"] == "security.alert"]
    assert alerts == [
        ("OUTPUT_FAILED", "jsonl: disk full"),
        ("COMMAND_REJECTED", "3 more command(s) refused and 1 dropped unread in the last 10.0 s (limits: l)"),
        ("COMMAND_REJECTED", "command 'c7': stale command"),
    ]
