"""Supervisor command parsing (docs/operations.md, MQTT): strict, and total: any
payload gives either a valid command or a CommandError, never anything else."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.commands_schema import COMMANDS, CommandError, command_dict, error_reply, parse_command


def cmd(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (cmd(id="a1", cmd="void", coup=12, reason="dealer error"), {"coup": 12, "reason": "dealer error"}),
        (cmd(id=7, cmd="enter_card", coup=3, card="10d"), {"coup": 3, "card": "TD"}),
        (cmd(id="x", cmd="accept", coup=1), {"coup": 1}),
        (cmd(id="x", cmd="new_shoe"), {}),
        (cmd(id="x", cmd="end_shoe"), {}),
    ],
)
def test_each_spec_command_parses_to_a_normalised_dict(payload: bytes, expected: dict[str, Any]) -> None:
    parsed = parse_command(payload)
    sent = json.loads(payload)
    assert sent["cmd"] == parsed.NAME and parsed.id == sent["id"]
    assert command_dict(parsed) == {"id": sent["id"], "cmd": sent["cmd"], **expected}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "must be a JSON object"),
        (cmd(cmd="new_shoe"), "missing 'id'"),
        (cmd(id=True, cmd="new_shoe"), "'id' must be"),
        (cmd(id="", cmd="new_shoe"), "'id' must be"),
        (cmd(id="a"), "missing 'cmd'"),
        (cmd(id="a", cmd="shuffle"), "unknown cmd 'shuffle'"),
        (cmd(id="a", cmd="void", coup=1), "void: missing 'reason'"),
        (cmd(id="a", cmd="void", reason="x"), "void: missing 'coup'"),
        (cmd(id="a", cmd="accept", coup=0), "'coup' must be an integer from 1 to 1000"),
        (cmd(id="a", cmd="accept", coup="3"), "'coup' must be an integer from 1 to 1000"),
        (cmd(id="a", cmd="accept", coup=True), "'coup' must be an integer from 1 to 1000"),
        (cmd(id="a", cmd="enter_card", coup=1, card="ZZ"), "enter_card: not a card"),
        (cmd(id="a", cmd="enter_card", coup=1, card=None), "'card' must be a card code"),
        (cmd(id="a", cmd="new_shoe", coup=1), "new_shoe: unknown field 'coup'"),
        (b'{"id": "a", "cmd": "new_shoe", "cmd": "end_shoe"}', "duplicate key 'cmd'"),
        (b'{"id": "a", "cmd": "accept", "coup": NaN}', "NaN is not JSON"),
        (b" " * 5000, "larger than"),
    ],
)
def test_malformed_commands_are_refused_with_a_reason(payload: bytes, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_command(payload)


def test_each_field_is_taken_at_its_bound_and_refused_past_it() -> None:
    """Every command input's stated bound (docs/operations.md, supervisor commands)."""
    base = {"id": "a", "cmd": "void", "coup": 1, "reason": "", "table": "T01", "ts": 1.5}

    def payload_of(size: int) -> bytes:
        p = json.dumps(base).encode()
        return p[:-1] + b" " * (size - len(p)) + b"}"

    assert len(payload_of(4096)) == 4096 and command_dict(parse_command(payload_of(4096)))["coup"] == 1
    with pytest.raises(CommandError, match="larger than 4096 bytes"):
        parse_command(payload_of(4097))
    good = {"id": "i" * 128, "coup": 1000, "reason": "r" * 500, "table": "T" * 32, "ts": 99_999_999_999.9}
    assert command_dict(parse_command(cmd(**{**base, **good})))["coup"] == 1000
    assert command_dict(parse_command(cmd(**{**base, "ts": 0})))["ts"] == 0
    assert parse_command(cmd(**{**base, "id": 2**63 - 1})).id == 2**63 - 1
    assert parse_command(cmd(**{**base, "id": -(2**63)})).id == -(2**63)
    for field, bad, message in [
        ("id", "i" * 129, "'id' must be 1 to 128"),
        ("id", 2**63, "must fit in 64 bits"),
        ("id", -(2**63) - 1, "must fit in 64 bits"),
        ("coup", 1001, "'coup' must be an integer from 1 to 1000"),
        ("coup", 10**400, "'coup' must be an integer from 1 to 1000"),
        ("reason", "r" * 501, "at most 500 characters"),
        ("table", "T" * 33, "'table' must be a table name"),
        ("table", "", "'table' must be a table name"),
        ("ts", 1e11, "'ts' must be Unix seconds"),
        ("ts", -0.001, "'ts' must be Unix seconds"),
    ]:
        with pytest.raises(CommandError, match=message):
            parse_command(cmd(**{**base, field: bad}))
    with pytest.raises(CommandError, match="'ts' must be Unix seconds"):
        parse_command(b'{"id": "a", "cmd": "new_shoe", "ts": 1e999}')  # json reads it as inf


def test_error_reply_echoes_the_id_when_it_can_be_read() -> None:
    payload = cmd(id="r-9", cmd="teleport")
    with pytest.raises(CommandError) as info:
        parse_command(payload)
    assert error_reply(info.value, payload) == {"id": "r-9", "ok": False, "error": info.value.args[0]}


def test_error_reply_has_a_null_id_when_there_is_none() -> None:
    with pytest.raises(CommandError) as info:
        parse_command(b"{")
    assert error_reply(info.value, b"{")["id"] is None


@given(st.binary(max_size=300))
def test_any_bytes_give_a_command_or_a_command_error(payload: bytes) -> None:
    with contextlib.suppress(CommandError):
        parse_command(payload)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.fixed_dictionaries(
        {
            "id": st.one_of(st.text(max_size=5), st.integers(), st.booleans()),
            "cmd": st.sampled_from([*COMMANDS, "x"]),
        },
        optional={"coup": json_values, "card": json_values, "reason": json_values, "extra": json_values},
    )
)
def test_any_json_object_gives_a_command_or_a_command_error(fields: dict[str, Any]) -> None:
    try:
        parsed = command_dict(parse_command(json.dumps(fields).encode()))
    except CommandError:
        return
    assert set(parsed) == {"id", "cmd", *COMMANDS[parsed["cmd"]]}
    if "coup" in parsed:
        assert isinstance(parsed["coup"], int) and parsed["coup"] >= 1
