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

from controller.archive.db import one_line

ADMIN_DSN = os.environ.get("ARCHIVE_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=postgres")

#: Where Debian's postgresql-common puts each installed server version.
PG_LIB = "/usr/lib/postgresql"


def installed_versions(lib: str = PG_LIB) -> list[str]:
    """The PostgreSQL server versions installed (Debian layout), newest first."""
    try:
        names = os.listdir(lib)
    except OSError:
        return []
    found = [n for n in names if n.replace(".", "").isdigit() and os.path.isfile(f"{lib}/{n}/bin/postgres")]
    return sorted(found, key=lambda n: tuple(int(p) for p in n.split(".")), reverse=True)


def how_to(problem: str, versions: list[str]) -> str:
    """What to do about ``problem`` (the server's or libpq's first line) on
    this machine: install, start, or allow trust authentication."""
    override = "or point ARCHIVE_TEST_PG at a server (a DSN whose user may create databases)"
    if "FATAL" in problem or "authentication" in problem or "password" in problem:
        # the server answered, and refused: authentication, or no such role
        ver = versions[0] if versions else "<version>"
        return (
            "the server answered but refused: the archive tests connect as the superuser postgres "
            "with trust authentication for local TCP: in "
            f"/etc/postgresql/{ver}/main/pg_hba.conf set 'host all all 127.0.0.1/32 trust', then "
            f"'sudo pg_ctlcluster {ver} main reload'; {override}"
        )
    if not versions:
        return (
            "the archive tests need PostgreSQL on 127.0.0.1:5432 with trust authentication for local TCP; "
            "it is not installed: 'sudo apt-get install postgresql' (it starts the server), then set "
            "'host all all 127.0.0.1/32 trust' in /etc/postgresql/<version>/main/pg_hba.conf and "
            f"'sudo pg_ctlcluster <version> main reload'; {override}"
        )
    ver = versions[0]
    return (
        f"the archive tests need PostgreSQL on 127.0.0.1:5432; PostgreSQL {ver} is installed but not "
        f"answering: start it with 'sudo pg_ctlcluster {ver} main start' (or 'sudo service postgresql "
        f"start'; 'pg_lsclusters' shows its port and state); {override}"
    )


def unavailable(dsn: str = ADMIN_DSN) -> str | None:
    """Why the test server cannot be used, and what to do, or None."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return None
    except psycopg.Error as exc:
        first = one_line(exc)
        return f"PostgreSQL is not reachable ({first}): {how_to(first, installed_versions())}"


def dsn_for(name: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(ADMIN_DSN)
    params["dbname"] = name
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})


@contextmanager
def temporary_database(prefix: str = "shoe_archive_test", *, keep: bool = False) -> Iterator[str]:
    """A fresh database; yields its DSN, drops it (and its sessions) after,
    unless ``keep`` (a benchmark's data kept to look at)."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    try:
        yield dsn_for(name)
    finally:
        if not keep:
            with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as admin:
                admin.execute(
                    psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        psycopg.sql.Identifier(name)
                    )
                )
