"""The real PostgreSQL the archive tests use: the server on
127.0.0.1:5432 with trust authentication (``ARCHIVE_TEST_PG`` overrides
the maintenance DSN). Every test gets its own database, named uniquely and
dropped afterwards. When the server is not there the tests fail (never
skip) with what to install or start."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

ADMIN_DSN = os.environ.get("ARCHIVE_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=postgres")

HOW_TO = (
    "the archive tests need PostgreSQL on 127.0.0.1:5432 with trust authentication for local TCP: "
    "install it with 'sudo apt-get install postgresql', start it with 'sudo pg_ctlcluster 15 main start' "
    "(or your version's), or point ARCHIVE_TEST_PG at a server (a DSN that may create databases)"
)


def unavailable(dsn: str = ADMIN_DSN) -> str | None:
    """Why the test server cannot be used, or None."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return None
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"PostgreSQL is not reachable ({first}): {HOW_TO}"


def dsn_for(name: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(ADMIN_DSN)
    params["dbname"] = name
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})


@contextmanager
def temporary_database(prefix: str = "shoe_archive_test") -> Iterator[str]:
    """A fresh database; yields its DSN, drops it (and its sessions) after."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    try:
        yield dsn_for(name)
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )
