"""Versioned schema migrations (``migrations/NNNN_name.sql``, package data).

``apply`` takes a PostgreSQL advisory lock for the whole run, so two
archivers started at once (or an operator's ``--migrate`` beside a running
one) apply each migration exactly once: the second waits, then finds it
recorded. Each migration runs in its own transaction with its row in
``schema_migrations``, so a failed one leaves nothing half applied. A
committed migration file is never edited; a change is a new file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from controller.archive.db import Conn

#: pg_advisory_lock key: "shoe-controller archive migrate".
MIGRATION_LOCK = 0x5C0A_0001

_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """Every migration shipped in the package, in version order."""
    found: list[Migration] = []
    for entry in resources.files("controller.archive").joinpath("migrations").iterdir():
        m = _NAME.fullmatch(entry.name)
        if m is None:
            continue
        found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migrations share a version: {versions}")
    return found


_CREATE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def applied(conn: Conn) -> list[int]:
    """Versions recorded in ``schema_migrations`` (empty when it is absent)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        row = cur.fetchone()
        if row is None or not row[0]:
            return []
        cur.execute("SELECT version FROM schema_migrations ORDER BY version")
        return [int(r[0]) for r in cur.fetchall()]


def pending(conn: Conn) -> list[Migration]:
    done = set(applied(conn))
    return [m for m in migrations() if m.version not in done]


def apply(conn: Conn) -> list[Migration]:
    """Apply every pending migration; returns those applied by this call.
    ``conn`` must be in autocommit mode (each migration is its own
    transaction; the advisory lock is held across them)."""
    if not conn.autocommit:
        raise ValueError("migrate.apply needs an autocommit connection")
    done: list[Migration] = []
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        conn.execute(_CREATE)
        for mig in pending(conn):
            with conn.transaction():
                conn.execute(mig.sql.encode())
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (mig.version, mig.name)
                )
            done.append(mig)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    return done


def check_current(conn: Conn) -> str | None:
    """None when the database has every shipped migration, else why not
    (what the archiver says before refusing to start)."""
    todo = pending(conn)
    if not todo:
        return None
    shipped = migrations()[-1].version
    have = applied(conn)
    return (
        f"the archive schema is at version {max(have) if have else 'none'}, this archiver needs {shipped}: "
        "run shoe-controller archive --config FILE --migrate"
    )
