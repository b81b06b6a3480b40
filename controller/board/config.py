"""The board's configuration (``shoe-controller board --config board.yaml``).

Validated like the daemon's (:mod:`controller.config`): unknown keys are
errors, and a bad file is one line naming the bad key (exit code 2). Every
input from outside has its bound here: the number of tables, the size of an
MQTT payload, the number of browsers streaming at once and how many updates
wait for each, the time a request head may take and the connections
waiting for one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from controller.config import (
    MqttConfig,
    _error,
    _Model,
    load_model,
    parse_host_port,
    parse_model,
    table_problem,
)

#: At most this many tables on one board (a pit's worth; each is one
#: subscription and one state in memory).
MAX_TABLES = 64
DEFAULT_LISTEN = "127.0.0.1:8080"
#: At most this many ``allowed_hosts`` entries (names a browser may use
#: for the board: a kiosk's localhost, a proxy's name, a LAN address).
MAX_ALLOWED_HOSTS = 32
#: A host name is at most 253 characters (RFC 1035), an IPv6 literal less.
_HOST = re.compile(r"(?:\[[0-9a-f:.]{2,45}\]|[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)(?::(\d{1,5}))?")


def host_entry(value: str) -> tuple[str, int | None]:
    """An ``allowed_hosts`` entry or a request's ``Host`` header, lower-cased
    -> (host, port or None). ``ValueError`` when it is not a host name, an
    IPv4 address or a bracketed IPv6 address, with an optional port."""
    text = value.strip().lower()
    m = _HOST.fullmatch(text)
    if m is None or ".." in text:
        raise ValueError(value)
    port = m.group(1)
    if port is not None and not 1 <= int(port) <= 65535:
        raise ValueError(value)
    host = text[: m.start(1) - 1] if port is not None else text
    return host, int(port) if port is not None else None


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
    #: seconds a connection may take to send a whole request head, from
    #: its opening (or the end of its previous answer) to the head's blank
    #: line; then it is closed, however slowly the bytes still come
    head_timeout_s: float = Field(default=5.0, ge=0.5, le=60.0)
    #: connections open with no request being served (opened and sending
    #: nothing yet, part of a head, idle between two requests) at once;
    #: one more closes the one waiting longest. They never count against
    #: ``max_clients``
    max_idle_connections: int = Field(default=256, ge=8, le=4096)


class BoardConfig(_Model):
    listen: str = DEFAULT_LISTEN
    mqtt: MqttConfig
    tables: list[TableEntry] = Field(min_length=1, max_length=MAX_TABLES)
    #: the live odds panel (needs the daemon's ``odds: true``)
    odds: bool = False
    limits: Limits = Limits()
    #: the names a browser may reach the board by (its ``Host`` header):
    #: anything else is refused (400), so that a hostile web page cannot
    #: read the board through DNS rebinding. ``host`` or ``host:port``; an
    #: entry without a port allows the listen port and the default one (a
    #: reverse proxy's). Default: the listen address, ``localhost``,
    #: ``127.0.0.1`` and ``[::1]``, with the listen port.
    allowed_hosts: list[str] | None = Field(default=None, min_length=1, max_length=MAX_ALLOWED_HOSTS)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_host_port(value)
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        for entry in value or []:
            try:
                host_entry(entry)
            except ValueError:
                raise _error(
                    "allowed_host",
                    "{value!r} is not a host name or address with an optional :port "
                    "(e.g. board.pit.local, 10.1.2.3:8080, [::1]:8080)",
                    value=entry,
                ) from None
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

    def hosts(self) -> frozenset[tuple[str, int | None]]:
        """The ``Host`` headers the board answers, as (host, port or None):
        an entry without a port allows the listen port and no port."""
        host, port = self.address
        listen = f"[{host}]" if ":" in host else host
        entries = self.allowed_hosts or [f"{h}:{port}" for h in (listen, "localhost", "127.0.0.1", "[::1]")]
        out: set[tuple[str, int | None]] = set()
        for entry in entries:
            name, p = host_entry(entry)
            out.update([(name, p)] if p is not None else [(name, port), (name, None)])
        return frozenset(out)

    def journals(self) -> dict[str, Path]:
        """Table id -> journal path, for the tables that name one."""
        return {t.table: Path(t.journal) for t in self.tables if t.journal is not None}


def load_board_config(path: str | os.PathLike[str]) -> BoardConfig:
    """Read and validate a board config; a problem is a ``ConfigError``
    naming the file and the bad key."""
    return load_model(path, BoardConfig)


def parse_board_config(text: str, name: str = "<board config>") -> BoardConfig:
    return parse_model(text, name, BoardConfig)
