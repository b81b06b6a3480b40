"""The board's configuration (``shoe-controller board --config board.yaml``).

Validated like the daemon's (:mod:`controller.config`): unknown keys are
errors, and a bad file is one line naming the bad key (exit code 2). Every
input from outside has its bound here: the number of tables, the size of an
MQTT payload, the number of browsers streaming at once and how many updates
wait for each.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from controller.config import (
    MqttConfig,
    _error,
    _Model,
    _read,
    parse_host_port,
    parse_model,
    table_problem,
)

#: At most this many tables on one board (a pit's worth; each is one
#: subscription and one state in memory).
MAX_TABLES = 64
DEFAULT_LISTEN = "127.0.0.1:8080"


class TableEntry(_Model):
    #: the table id, as in the daemon's config (an MQTT topic segment)
    table: str
    #: shown on the page; the table id when not given
    title: str | None = Field(default=None, min_length=1, max_length=64)
    #: the daemon's journal (read-only): with it, the board serves the
    #: table's history pages and every road cell links to its coup
    journal: str | None = Field(default=None, min_length=1)

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        problem = table_problem(value)
        if problem is not None:
            raise _error("table", problem)
        return value


class Limits(_Model):
    #: a larger MQTT message is dropped unread (and counted): a whole
    #: shoe's roads event is a few KiB
    max_payload_bytes: int = Field(default=256 * 1024, ge=1024, le=16 * 1024 * 1024)
    #: browsers streaming at once, all tables together; one more is
    #: answered 503
    max_clients: int = Field(default=64, ge=1, le=4096)
    #: updates waiting for one browser; a slow browser loses the oldest
    #: (each update is the whole view, so it only skips frames)
    client_queue: int = Field(default=8, ge=1, le=1024)
    #: seconds between keep-alive comments on an idle stream (a dead
    #: browser is found within this)
    heartbeat_s: float = Field(default=15.0, ge=0.5, le=300.0)


class BoardConfig(_Model):
    listen: str = DEFAULT_LISTEN
    mqtt: MqttConfig
    tables: list[TableEntry] = Field(min_length=1, max_length=MAX_TABLES)
    #: the live odds panel (needs the daemon's ``odds: true``)
    odds: bool = False
    limits: Limits = Limits()

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_host_port(value)
        return value

    @field_validator("mqtt", mode="before")
    @classmethod
    def _no_commands(cls, value: Any) -> Any:
        if isinstance(value, dict) and "command_key_file" in value:
            raise _error("read_only", "command_key_file: the board is read-only and sends no commands")
        return value

    @field_validator("tables")
    @classmethod
    def _unique(cls, value: list[TableEntry]) -> list[TableEntry]:
        seen: set[str] = set()
        for entry in value:
            if entry.table in seen:
                raise _error("duplicate_table", "table {table!r} is listed twice", table=entry.table)
            seen.add(entry.table)
        return value

    @property
    def address(self) -> tuple[str, int]:
        return parse_host_port(self.listen)

    def journals(self) -> dict[str, Path]:
        """Table id -> journal path, for the tables that name one."""
        return {t.table: Path(t.journal) for t in self.tables if t.journal is not None}


def load_board_config(path: str | os.PathLike[str]) -> BoardConfig:
    """Read and validate a board config; a problem is a ``ConfigError``
    naming the file and the bad key."""
    return parse_model(_read(path), os.fspath(path), BoardConfig)


def parse_board_config(text: str, name: str = "<board config>") -> BoardConfig:
    return parse_model(text, name, BoardConfig)
