"""The archive's PostgreSQL connection type and how one is opened."""

from __future__ import annotations

from typing import Any

import psycopg

from controller.errors import RuntimeFailure

Conn = psycopg.Connection[tuple[Any, ...]]

#: Seconds to wait for PostgreSQL to accept a connection.
CONNECT_TIMEOUT_S = 10


def connect(dsn: str, *, autocommit: bool = False, application_name: str = "shoe-controller archive") -> Conn:
    """A connection, or ``RuntimeFailure`` saying what went wrong in one line."""
    try:
        return psycopg.connect(
            dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S, application_name=application_name
        )
    except psycopg.Error as exc:
        raise RuntimeFailure(f"cannot connect to PostgreSQL: {one_line(exc)}") from None


def one_line(exc: BaseException) -> str:
    """An error's first line (libpq's messages run over several), or its
    type's name when it has no text: what a log line or a one-line error shows."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
