"""A throwaway PostgreSQL database on the machine's server (127.0.0.1:5432,
trust authentication), with the archive schema, for the floor tests.

``fresh_archive()`` creates a uniquely named database, applies every
archive migration, yields its DSN and drops it (with force) afterwards.
When the server is not there the test fails with what to install or start;
``PG_ADMIN_DSN`` overrides where the server is.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

ADMIN_DSN = os.environ.get("PG_ADMIN_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=postgres")
HOW_TO = (
    "the floor archive tests need PostgreSQL on 127.0.0.1:5432 with trust authentication for "
    "127.0.0.1 (or PG_ADMIN_DSN set): install it with 'sudo apt-get install postgresql' and start it "
    "with 'sudo service postgresql start' (pg_hba.conf: 'host all all 127.0.0.1/32 trust')"
)


def _admin() -> object:
    import psycopg

    try:
        return psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        pytest.fail(f"{HOW_TO}. ({first})", pytrace=False)


def dsn_of(dbname: str) -> str:
    parts = [p for p in ADMIN_DSN.split() if not p.startswith("dbname=")]
    return " ".join([*parts, f"dbname={dbname}"])


@contextmanager
def fresh_database(prefix: str = "floor_test") -> Iterator[str]:
    """An empty, uniquely named database's DSN; dropped afterwards."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("the floor archive tests need psycopg: make venv installs it (extra 'archive')")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = _admin()
    admin.execute(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        yield dsn_of(name)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[attr-defined]
        admin.close()  # type: ignore[attr-defined]


@contextmanager
def fresh_archive(prefix: str = "floor_test") -> Iterator[str]:
    """A fresh database with every archive migration applied."""
    from controller.archive import migrate
    from controller.archive.db import connect

    with fresh_database(prefix) as dsn:
        conn = connect(dsn, autocommit=True)
        try:
            migrate.apply(conn)
        finally:
            conn.close()
        yield dsn
